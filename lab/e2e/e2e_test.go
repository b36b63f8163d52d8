package e2e

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// need skips t with the reason when something the test needs is missing:
// "root", "fuse" (/dev/fuse), "fio", "mkfs" (mkfs.erofs), "loop".
func need(t *testing.T, what ...string) {
	t.Helper()
	for _, w := range what {
		switch w {
		case "root":
			if os.Geteuid() != 0 {
				t.Skip("needs root (mount, loop devices)")
			}
		case "fuse":
			if _, err := os.Stat("/dev/fuse"); err != nil {
				t.Skipf("no /dev/fuse: %v", err)
			}
		case "fio":
			if _, err := exec.LookPath("fio"); err != nil {
				t.Skip("fio is not installed")
			}
		case "mkfs":
			if _, err := exec.LookPath("mkfs.erofs"); err != nil {
				t.Skip("mkfs.erofs is not installed (erofs-utils)")
			}
		case "loop":
			if _, err := os.Stat("/dev/loop-control"); err != nil {
				t.Skipf("no loop devices: %v", err)
			}
		}
	}
}

// makeTree writes a small tree whose files cover the block edges: empty,
// one byte, one block less one, one block, one block plus one, several
// blocks of text, incompressible bytes, and a nested directory.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	text := func(n int) []byte {
		var b bytes.Buffer
		for i := 0; b.Len() < n; i++ {
			b.WriteString("func f() { return queue_work(wq, &work) } // line ")
			b.WriteString(strings.Repeat("x", i%17))
			b.WriteByte('\n')
		}
		return b.Bytes()[:n]
	}
	rnd := make([]byte, 3*BlockSize+123)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(rnd)
	files := map[string][]byte{
		"empty":           nil,
		"one":             {'a'},
		"a/short":         text(BlockSize - 1),
		"a/block":         text(BlockSize),
		"a/block1":        text(BlockSize + 1),
		"a/b/many":        text(7*BlockSize + 999),
		"random.bin":      rnd,
		"a/b/c/deep.text": text(5000),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// compareTrees reads every regular file of src through mnt and compares
// it byte for byte, whole and at offsets across block edges; it also
// checks that mnt lists no file src lacks.
func compareTrees(t *testing.T, src, mnt string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(mnt, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes through the mount, not equal to the %d of the source", rel, len(got), len(want))
		}
		f, err := os.Open(filepath.Join(mnt, rel))
		if err != nil {
			return err
		}
		defer f.Close()
		for _, off := range []int64{BlockSize - 100, 2*BlockSize - 1, 4096, 3} {
			if off >= int64(len(want)) {
				continue
			}
			buf := make([]byte, 300)
			k, _ := f.ReadAt(buf, off)
			if !bytes.Equal(buf[:k], want[off:min(off+300, int64(len(want)))]) {
				t.Errorf("%s: pread at %d differs", rel, off)
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			count++
		}
		return nil
	})
	if count != n {
		t.Errorf("mount lists %d files, source has %d", count, n)
	}
}

func newTestSession(t *testing.T) *Session {
	t.Helper()
	s, err := NewSession(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestRoundTripFUSE reads every file of a tree back through the FUSE
// file system on every executor.
func TestRoundTripFUSE(t *testing.T) {
	need(t, "root", "fuse")
	src := t.TempDir()
	makeTree(t, src)
	c, err := BuildContainer(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ExecIDs {
		t.Run(id, func(t *testing.T) {
			ex, err := NewExecutor(id, 2)
			if errors.Is(err, ErrPermission) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			s := newTestSession(t)
			mnt, err := s.MountFUSE(id, c, ex)
			if err != nil {
				t.Fatal(err)
			}
			compareTrees(t, src, mnt)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			ex.Close()
			if left := mountsUnder(s.Dir); len(left) > 0 {
				t.Fatalf("still mounted after Close: %v", left)
			}
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Fatalf("session directory left after Close: %v", err)
			}
		})
	}
}

// TestRoundTripEROFS reads every file of a tree back through the
// kernel's EROFS (LZ4HC) on a loop device, and checks that Close
// releases the device.
func TestRoundTripEROFS(t *testing.T) {
	need(t, "root", "mkfs", "loop")
	src := t.TempDir()
	makeTree(t, src)
	s := newTestSession(t)
	img := filepath.Join(s.Dir, "image.erofs")
	if err := MakeEROFS(context.Background(), img, src); err != nil {
		t.Fatal(err)
	}
	mnt, loop, err := s.MountEROFS("kernel", img)
	if err != nil {
		t.Skipf("EROFS (LZ4) cannot be mounted here: %v", err)
	}
	compareTrees(t, src, mnt)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	waitLoopFree(t, loop, img)
}

// waitLoopFree fails t unless loop is no longer bound to img within 2 s.
func waitLoopFree(t *testing.T, loop, img string) {
	t.Helper()
	for range 100 {
		if len(loopsUnder([]string{filepath.Dir(img)})) == 0 {
			return
		}
		sleepMs(20)
	}
	t.Fatalf("%s still bound to %s", loop, img)
}

// TestCorruptBlockIsEIO: a block whose stored bytes no longer match the
// hash table is refused with EIO, not served.
func TestCorruptBlockIsEIO(t *testing.T) {
	need(t, "root", "fuse")
	src := t.TempDir()
	makeTree(t, src)
	c, err := BuildContainer(src)
	if err != nil {
		t.Fatal(err)
	}
	// A compressed block, and a block stored raw (incompressible), whose
	// flipped byte only the hash can tell.
	c.corruptBlock(c.File("a/b/many"), 2)
	c.corruptBlock(c.File("random.bin"), 1)
	s := newTestSession(t)
	mnt, err := s.MountFUSE("x", c, inline{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a/b/many", "random.bin"} {
		f, err := os.Open(filepath.Join(mnt, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 100)
		off := int64(2*BlockSize + 10)
		if name == "random.bin" {
			off = BlockSize + 10
		}
		if _, err := f.ReadAt(buf, off); !errors.Is(err, syscall.EIO) {
			t.Errorf("%s: read of a corrupt block: %v, want EIO", name, err)
		}
		if _, err := f.ReadAt(buf, 10); err != nil {
			t.Errorf("%s: read of a good block: %v", name, err)
		}
	}
}
