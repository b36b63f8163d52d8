package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gowq/wq/lab/driver"
)

// The test binary re-executed as a child runs Run on a small tree
// (GOWQ_E2E_CHILD=run) with its base and source from the environment.
func TestMain(m *testing.M) {
	switch os.Getenv("GOWQ_E2E_CHILD") {
	case "run":
		os.Exit(childRun())
	case "mkfs":
		err := MakeEROFS(context.Background(), os.Getenv("GOWQ_E2E_IMG"), os.Getenv("GOWQ_E2E_SRC"))
		fmt.Fprintf(os.Stderr, "child: MakeEROFS returned: %v\n", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func childRun() int {
	o := Options{Pass: 30 * time.Second, Rounds: 1, Loads: []driver.LoadKind{driver.LoadNone},
		CorpusBytes: 64 << 10, Source: os.Getenv("GOWQ_E2E_SRC"), Base: os.Getenv("GOWQ_E2E_BASE"), Log: os.Stderr}
	_, err := Run(context.Background(), o)
	fmt.Fprintf(os.Stderr, "child: Run returned: %v\n", err)
	if err != nil {
		return 3
	}
	return 0
}

// startChild starts a child Run on base and waits until it measures (all
// rows mounted, fio running); it returns the child.
func startChild(t *testing.T, base string) *exec.Cmd {
	t.Helper()
	src := t.TempDir()
	makeTree(t, src)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GOWQ_E2E_CHILD=run", "GOWQ_E2E_BASE="+base, "GOWQ_E2E_SRC="+src)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		closed := false
		for sc.Scan() {
			if !closed && strings.Contains(sc.Text(), "e2e: load none:") {
				close(ready)
				closed = true
			}
			t.Logf("child: %s", sc.Text())
		}
		if !closed {
			close(ready)
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child did not start measuring within 60 s")
	}
	// fio starts right after the load line.
	time.Sleep(300 * time.Millisecond)
	if len(sessionMounts(base)) == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child mounted nothing")
	}
	return cmd
}

// sessionMounts lists the mounts and loop devices under base.
func sessionMounts(base string) []string {
	return leftovers(base)
}

// fioOf lists processes whose command line names base (the child's fio).
func fioOf(base string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), base+"/") {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func waitGone(t *testing.T, what string, f func() []string) {
	t.Helper()
	var left []string
	for range 100 {
		if left = f(); len(left) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s still there after 5 s: %v", what, left)
}

// TestKilledRunIsCleaned: a run killed with SIGKILL while fio reads
// leaves its mounts (no exit path runs); its fio dies with it (parent
// death signal), and the next start's Cleanup unmounts, releases the loop
// device and removes the session directory.
func TestKilledRunIsCleaned(t *testing.T) {
	need(t, "root", "fuse", "fio", "mkfs", "loop")
	base := t.TempDir()
	cmd := startChild(t, base)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitGone(t, "orphaned fio", func() []string { return fioOf(base) })
	if len(sessionMounts(base)) == 0 {
		t.Fatal("a SIGKILLed run left nothing: the test did not kill it mid-mount")
	}
	rep, err := Cleanup(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup:\n%s", rep)
	if len(rep.Unmounted) == 0 || len(rep.Removed) != 1 {
		t.Errorf("cleanup report %+v: want the stale mounts unmounted and one session removed", rep)
	}
	waitGone(t, "mounts and loop devices", func() []string { return sessionMounts(base) })
	ents, _ := os.ReadDir(base)
	if len(ents) != 0 {
		t.Errorf("base still holds %v", ents)
	}
}

// TestSignalsCancel: each of the signals that end a run (INT, TERM,
// HUP, QUIT, PIPE) makes Run unmount, release and remove everything
// before the process exits, and Run returns an error (the child exits
// 3), not the signal's default action.
func TestSignalsCancel(t *testing.T) {
	need(t, "root", "fuse", "fio", "mkfs", "loop")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			cmd := startChild(t, base)
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("child still running 20 s after %v", sig)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Errorf("child after %v: %v, want exit status 3 (Run returned an error)", sig, err)
			}
			if left := sessionMounts(base); len(left) > 0 {
				t.Errorf("left after %v: %v", sig, left)
			}
			if f := fioOf(base); len(f) > 0 {
				t.Errorf("fio left after %v: %v", sig, f)
			}
			if ents, _ := os.ReadDir(base); len(ents) != 0 {
				t.Errorf("session directory left after %v: %v", sig, ents)
			}
		})
	}
}

// TestChildInheritsNoFUSE: a process started while a FUSE mount is up
// holds no /dev/fuse descriptor.
func TestChildInheritsNoFUSE(t *testing.T) {
	need(t, "root", "fuse")
	src := t.TempDir()
	makeTree(t, src)
	c, err := BuildContainer(src)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSession(t)
	if _, err := s.MountFUSE("x", c, inline{}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", "-c", "ls -l /proc/self/fd/").CombinedOutput()
	if err != nil {
		t.Fatalf("ls: %v: %s", err, out)
	}
	if strings.Contains(string(out), "/dev/fuse") {
		t.Fatalf("the child inherited /dev/fuse:\n%s", out)
	}
}

// TestCleanupLeavesOthersAlone: Cleanup removes dead sessions (also one
// whose pid is alive but names another process: a reused pid) and keeps
// a live session and its mount.
func TestCleanupLeavesOthersAlone(t *testing.T) {
	need(t, "root", "fuse")
	base := t.TempDir()
	src := t.TempDir()
	makeTree(t, src)
	c, err := BuildContainer(src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mnt, err := s.MountFUSE("live", c, inline{})
	if err != nil {
		t.Fatal(err)
	}
	dead := []string{filepath.Join(base, "999999999-5"), filepath.Join(base, fmt.Sprintf("%d-1", os.Getpid()))}
	for _, d := range dead {
		if err := os.MkdirAll(filepath.Join(d, "mnt"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Cleanup(base)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 2 || len(rep.Unmounted) != 0 {
		t.Errorf("report %+v: want the two dead sessions removed and nothing unmounted", rep)
	}
	for _, d := range dead {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("dead session %s still there", d)
		}
	}
	if _, err := os.ReadFile(filepath.Join(mnt, "a/block")); err != nil {
		t.Errorf("the live session's mount no longer serves: %v", err)
	}
}

// TestCleanupFindsHeldLoop: a loop device bound to a dead session's
// image and held open by a process is not claimed released: Cleanup
// reports it set to autoclear and names the holder; once the holder lets
// go, the kernel releases it.
func TestCleanupFindsHeldLoop(t *testing.T) {
	need(t, "root", "loop")
	base := t.TempDir()
	dead := filepath.Join(base, "999999999-7")
	if err := os.MkdirAll(dead, 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dead, "image")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, dev, err := attachLoop(img)
	if err != nil {
		t.Skipf("cannot attach a loop device: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			syscall.Close(fd)
		}
	}()
	rep, err := Cleanup(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleanup:\n%s", rep)
	if len(rep.Loops) != 1 {
		t.Fatalf("report %+v: want one loop device", rep)
	}
	l := rep.Loops[0]
	me := fmt.Sprintf("pid %d ", os.Getpid())
	if l.Device != dev || l.Released || !l.Autoclear || len(l.Holders) == 0 || !strings.HasPrefix(l.Holders[0], me) {
		t.Fatalf("loop state %+v: want %s busy, not released, autoclear, held by %s", l, dev, me)
	}
	if !strings.Contains(rep.String(), "NOT released") {
		t.Errorf("report text does not say the device was not released:\n%s", rep)
	}
	syscall.Close(fd)
	closed = true
	waitGone(t, "loop device", func() []string { return leftovers(base) })
}

// stuck is an executor that accepts work and never runs it.
type stuck struct{}

func (stuck) Run(func()) error { return nil }
func (stuck) Close()           {}

// TestCloseFreesBlockedReader: a read waiting for a block that never
// comes returns (EINTR) when the session closes, and Close returns.
func TestCloseFreesBlockedReader(t *testing.T) {
	need(t, "root", "fuse")
	src := t.TempDir()
	makeTree(t, src)
	c, err := BuildContainer(src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	fsys := &fuseFS{c: c, ex: stuck{}, ctx: s.Context(), beforeRead: func(context.Context) {
		select {
		case entered <- struct{}{}:
		default:
		}
	}}
	mnt, err := s.mountFUSE("x", fsys)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(mnt, "a/block"))
		readErr <- err
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		s.Close()
		t.Fatal("the read never reached the file system")
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("the blocked read succeeded; want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read did not return within 10 s of Close")
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s")
	}
	if left := mountsUnder(s.Dir); len(left) > 0 {
		t.Errorf("still mounted: %v", left)
	}
}

// TestFioStopsWithContext: a long fio pass ends, and its process is
// gone, soon after the context ends.
func TestFioStopsWithContext(t *testing.T) {
	need(t, "fio")
	dir := t.TempDir()
	f := filepath.Join(dir, "data")
	if err := os.WriteFile(f, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	t0 := time.Now()
	_, err := RunFio(ctx, dir, Job{File: f, Runtime: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunFio: %v, want context.Canceled", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("RunFio returned %v after the start, for a context ended after 0.5 s", d)
	}
	waitGone(t, "fio", func() []string { return fioOf(dir) })
}

// TestRunMeasuresEveryRow: a short Run measures every row (each file read
// back first), writes its tables, goals and HTML, and leaves nothing
// under its base.
func TestRunMeasuresEveryRow(t *testing.T) {
	need(t, "root", "fuse", "fio", "mkfs", "loop")
	src := t.TempDir()
	makeTree(t, src)
	base := t.TempDir()
	res, err := Run(context.Background(), Options{Pass: 100 * time.Millisecond, Rounds: 1,
		Loads: []driver.LoadKind{driver.LoadNone}, CorpusBytes: 64 << 10, Source: src, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tables) != 1 {
		t.Fatalf("%d tables, want 1", len(res.Tables))
	}
	for _, r := range res.Tables[0].Rows {
		if r.Skipped || r.Reads == 0 || r.Clat.P99Us <= 0 {
			t.Errorf("row %s: skipped %v (%s), %d reads, p99 %v", r.ID, r.Skipped, r.SkipReason, r.Reads, r.Clat.P99Us)
		}
	}
	if len(res.Goals) == 0 || res.Goals[0].Verdict != "met" {
		t.Errorf("goals %+v: want the identity goal met", res.Goals)
	}
	if len(res.Leftover) > 0 {
		t.Errorf("left after Close: %v", res.Leftover)
	}
	if ents, _ := os.ReadDir(base); len(ents) != 0 {
		t.Errorf("base still holds %v", ents)
	}
	var txt, html, fio strings.Builder
	if err := errors.Join(res.WriteTable(&txt), res.WriteHTML(&html), res.WriteFio(&fio)); err != nil {
		t.Fatal(err)
	}
	for _, id := range RowIDs() {
		l := rowLabels[id]
		if !strings.Contains(txt.String(), l) || !strings.Contains(html.String(), l) || !strings.Contains(fio.String(), l) {
			t.Errorf("%q missing from the text, HTML or fio output", l)
		}
	}
}
