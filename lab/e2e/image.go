package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// CorpusFile is the name of the file the rows' fio jobs read: the lab's
// corpus as one stream.
const CorpusFile = "corpus.bin"

// StageCorpus writes dst/corpus.bin: the regular files under src (the
// lab's erofs corpus, $GOROOT/src by default) concatenated in lexical
// walk order up to maxBytes bytes, the same stream lab/erofs cuts into
// clusters. It returns the file's path.
func StageCorpus(dst, src string, maxBytes int64) (string, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dst, CorpusFile)
	out, err := os.Create(p)
	if err != nil {
		return "", err
	}
	var n int64
	full := errors.New("full")
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil
			}
			return err
		}
		defer f.Close()
		c, err := io.Copy(out, io.LimitReader(f, maxBytes-n))
		n += c
		if err != nil {
			return err
		}
		if n >= maxBytes {
			return full
		}
		return nil
	})
	if cerr := out.Close(); err == nil || err == full {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("e2e: staging the corpus from %s: %w", src, err)
	}
	if n == 0 {
		return "", fmt.Errorf("e2e: no data under %s", src)
	}
	return p, nil
}

// ErrNoMkfs is returned when mkfs.erofs (erofs-utils) is not installed.
var ErrNoMkfs = errors.New("e2e: mkfs.erofs is not installed (erofs-utils)")

// MakeEROFS builds an LZ4HC-compressed EROFS image of the tree src at
// image (`mkfs.erofs -zlz4hc image src`). It blocks while mkfs runs
// (about 1 s for 32 MiB on a 2-CPU VM) and is killed when ctx ends, and
// also when this process dies (SIGKILL as its parent-death signal), so
// that no orphaned mkfs writes on into a dead session.
func MakeEROFS(ctx context.Context, image, src string) error {
	bin, err := exec.LookPath("mkfs.erofs")
	if err != nil {
		return ErrNoMkfs
	}
	cmd := exec.CommandContext(ctx, bin, "-zlz4hc", image, src)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("e2e: mkfs.erofs -zlz4hc: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
