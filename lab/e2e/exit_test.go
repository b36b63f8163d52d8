package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/lab/driver"
)

// TestCancelledRunBlamesNoRow: a run whose context ends while it
// prepares (Ctrl-C right after the start) mounts no further row and
// logs no row as broken ("read back failed: input/output error" is
// what the reads of a row mounted after the end got).
func TestCancelledRunBlamesNoRow(t *testing.T) {
	need(t, "root", "fuse", "fio")
	src := t.TempDir()
	makeTree(t, src)
	base := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log testutil.SyncBuffer
	_, err := Run(ctx, Options{Pass: 100 * time.Millisecond, Rounds: 1, Loads: []driver.LoadKind{driver.LoadNone},
		CorpusBytes: 64 << 10, Source: src, Base: base, Configs: ExecIDs, Log: &log})
	if err == nil {
		t.Fatal("Run with an ended context returned no error")
	}
	if s := log.String(); strings.Contains(s, "read back") || strings.Contains(s, "input/output error") {
		t.Errorf("a cancelled run blamed its rows:\n%s", s)
	}
	if left := sessionMounts(base); len(left) > 0 {
		t.Errorf("left: %v", left)
	}
}

// TestCancelReportsHeldLoop: when a run ends by its context (a signal)
// while another holder keeps a file of the kernel row open, the lazy
// unmount leaves the loop device bound until that holder lets go; the
// run says so on its log, naming the device, instead of exiting
// silently with it bound.
func TestCancelReportsHeldLoop(t *testing.T) {
	need(t, "root", "fio", "mkfs", "loop")
	src := t.TempDir()
	makeTree(t, src)
	base := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Pass: 10 * time.Second, Rounds: 1, Loads: []driver.LoadKind{driver.LoadNone},
			CorpusBytes: 64 << 10, Source: src, Base: base, Configs: []string{RowKernel}, Log: &log})
		done <- err
	}()
	var f *os.File
	for deadline := time.Now().Add(60 * time.Second); f == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !strings.Contains(log.String(), "e2e: load none:") {
			continue
		}
		ms, _ := filepath.Glob(filepath.Join(base, "*", "mnt", RowKernel, CorpusFile))
		if len(ms) == 1 {
			f, _ = os.Open(ms[0])
		}
	}
	if f == nil {
		cancel()
		t.Fatalf("the kernel row was not mounted within 60 s:\n%s", log.String())
	}
	cancel()
	err := <-done
	held := loopsUnder([]string{filepath.Dir(filepath.Dir(filepath.Dir(f.Name())))})
	f.Close()
	if err == nil {
		t.Fatal("Run returned no error after its context ended")
	}
	if len(held) == 0 {
		t.Skip("the loop device was released while a file was open (no lazy unmount left it bound)")
	}
	if s := log.String(); !strings.Contains(s, held[0][0]) {
		t.Errorf("%s stayed bound after the run (held by the test's open file) and the log does not say so:\n%s", held[0][0], s)
	}
	waitGone(t, "loop devices", func() []string { return sessionMounts(base) })
}

// TestKernelDecompressionIsMeasured: where the kernel row decompresses
// is read from this run's own mount (its sync_decompress after the run),
// not a fixed sentence; sequential readahead (more than
// max_sync_decompress_pages pages) is not claimed to decompress in the
// reader.
func TestKernelDecompressionIsMeasured(t *testing.T) {
	need(t, "root", "fio", "mkfs", "loop")
	src := t.TempDir()
	makeTree(t, src)
	for _, seq := range []bool{false, true} {
		res, err := Run(context.Background(), Options{Sequential: seq, Pass: 100 * time.Millisecond, Rounds: 1,
			Loads: []driver.LoadKind{driver.LoadNone}, CorpusBytes: 64 << 10, Source: src, Base: t.TempDir(),
			Configs: []string{RowKernel}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Tables[0].Rows[len(res.Tables[0].Rows)-1].Skipped {
			t.Skipf("kernel row skipped: %s", res.Tables[0].Rows[len(res.Tables[0].Rows)-1].SkipReason)
		}
		mode := res.Settings.SyncDecompress
		if mode == "" {
			t.Fatalf("sequential %v: the mount's sync_decompress was not read", seq)
		}
		if !strings.Contains(res.Decompression, "sync_decompress "+mode) {
			t.Errorf("sequential %v: the note does not give the measured sync_decompress %q: %s", seq, mode, res.Decompression)
		}
		if seq && (strings.Contains(res.Decompression, "never on a workqueue") || !strings.Contains(res.Decompression, "erofs_worker")) {
			t.Errorf("sequential: the note claims the reader decompresses, or does not name erofs_worker: %s", res.Decompression)
		}
	}
}

// TestUncheckedCleanupIsNotNothingStale: when the start could not look
// for what killed runs left (not root, or the base unreadable), the text
// says so instead of "nothing stale". No fio on PATH, so nothing mounts.
func TestUncheckedCleanupIsNotNothingStale(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	base := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(base, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Options{Pass: 100 * time.Millisecond, Rounds: 1,
		Loads: []driver.LoadKind{driver.LoadNone}, CorpusBytes: 64 << 10, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	var txt strings.Builder
	if err := res.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(txt.String(), "nothing stale") || !strings.Contains(txt.String(), "cleanup at start: not run") {
		t.Errorf("the start could not clean (base %s is a file, or not root), but the text says:\n%s", base, txt.String())
	}
}

// childrenOf returns the pids of pid's children named comm.
func childrenOf(pid int, comm string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if i < 0 || j < i {
			continue
		}
		f := strings.Fields(s[j+1:])
		if s[i+1:j] == comm && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(e.Name())
			out = append(out, n)
		}
	}
	return out
}

// TestKilledRunLeavesNoMkfs: mkfs.erofs, like fio, dies with a run
// killed by SIGKILL, instead of going on as an orphan writing into the
// dead session. The test stops mkfs (SIGSTOP) before it kills the run,
// so that an orphan stays until the test kills it.
func TestKilledRunLeavesNoMkfs(t *testing.T) {
	need(t, "mkfs")
	src := t.TempDir()
	data := make([]byte, 8<<20)
	rand.NewChaCha8([32]byte{3}).Read(data)
	if err := os.WriteFile(filepath.Join(src, "random.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOWQ_E2E_CHILD=mkfs", "GOWQ_E2E_SRC="+src, "GOWQ_E2E_IMG="+filepath.Join(t.TempDir(), "image.erofs"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mkfs []int
	for deadline := time.Now().Add(30 * time.Second); len(mkfs) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mkfs = childrenOf(cmd.Process.Pid, "mkfs.erofs")
	}
	if len(mkfs) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Skip("mkfs.erofs finished before the test saw it")
	}
	syscall.Kill(mkfs[0], syscall.SIGSTOP)
	defer syscall.Kill(mkfs[0], syscall.SIGKILL)
	cmd.Process.Kill()
	cmd.Wait()
	waitGone(t, "orphaned mkfs.erofs", func() []string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", mkfs[0]))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return nil
		}
		return []string{strings.TrimSpace(string(b))}
	})
}

// TestConcurrentRunIsReported: a run started while another run's session
// is live leaves it alone and says, in its text, that the figures share
// the CPUs with it. The other run here is a live process (a sleep)
// owning a session directory; no fio on PATH, so nothing mounts.
func TestConcurrentRunIsReported(t *testing.T) {
	need(t, "root")
	base := t.TempDir()
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	st, err := startTime(other.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(base, fmt.Sprintf("%d-%d", other.Process.Pid, st))
	if err := os.MkdirAll(live, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	res, err := Run(context.Background(), Options{Pass: 100 * time.Millisecond, Rounds: 1,
		Loads: []driver.LoadKind{driver.LoadNone}, CorpusBytes: 64 << 10, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	var txt strings.Builder
	if err := res.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "another e2e run is live ("+live+")") {
		t.Errorf("a live session %s is not reported:\n%s", live, txt.String())
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live session was touched: %v", err)
	}
}
