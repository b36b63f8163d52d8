package kthread_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/kthread"
)

// checkClass checks that wk's thread runs a and that Class says so.
func checkClass(t *testing.T, wk *kthread.Worker, a sched.Attr) {
	t.Helper()
	checkAttr(t, wk, a)
	c, err := wk.Class()
	if want := (kthread.Class{Policy: a.Policy.String(), Priority: a.Priority, Nice: a.Nice}); c != want || err != nil {
		t.Errorf("%s: Class() = %v, %v; want %v, nil", wk.Name(), c, err, want)
	}
}

// TestClassApplied: a worker runs the class it was given, SCHED_OTHER at
// nice 0 by default (set, not inherited); a setter that succeeds changes
// it, one that the kernel refuses changes nothing, and Class reports it
// throughout. Where this process may not lower its nice to 0 (`nice -n
// 19` unprivileged), the default keeps the inherited nice and Class says
// so with ErrPermission.
func TestClassApplied(t *testing.T) {
	captureErrors(t)
	normal0 := sched.Attr{Policy: sched.PolicyNormal}
	plain := newWorker(t, "kt-class")
	if canSetNice(0) {
		checkClass(t, plain, normal0)
	} else {
		c, err := plain.Class()
		proc, _ := sched.GetAttr(os.Getpid())
		if !errors.Is(err, kthread.ErrPermission) || c.Nice != proc.Nice {
			t.Errorf("Class() = %v, %v; want the inherited nice %d and ErrPermission", c, err, proc.Nice)
		}
		checkAttr(t, plain, sched.Attr{Policy: sched.PolicyNormal, Nice: proc.Nice})
	}
	n := testNice(t)
	nw := newWorker(t, "kt-class-nice", kthread.WithNice(n))
	checkClass(t, nw, sched.Attr{Policy: sched.PolicyNormal, Nice: n})
	if n < 19 {
		if err := kthread.SetNormal(nw, 19); err != nil {
			t.Fatal(err)
		}
		checkClass(t, nw, sched.Attr{Policy: sched.PolicyNormal, Nice: 19})
	}
	// Lowering nice back, and RT, may be refused; refused changes nothing.
	before, _ := nw.Class()
	beforeAttr, _ := sched.GetAttr(nw.TID())
	for _, s := range []struct {
		name string
		set  func() error
		ok   bool
		want sched.Attr
	}{
		{"SetNormal(0)", func() error { return kthread.SetNormal(nw, 0) }, mayLowerNice(0), normal0},
		{"SetFIFOLow", func() error { return kthread.SetFIFOLow(nw) }, sched.CheckRT(1) == nil,
			sched.Attr{Policy: sched.PolicyFIFO, Priority: kthread.FIFOLowPriority}},
		{"SetNormal(-5)", func() error { return kthread.SetNormal(nw, -5) }, canSetNice(-5),
			sched.Attr{Policy: sched.PolicyNormal, Nice: -5}},
	} {
		err := s.set()
		switch {
		case s.ok && err != nil:
			t.Errorf("%s = %v, want nil", s.name, err)
		case s.ok:
			checkClass(t, nw, s.want)
			before, _ = nw.Class()
			beforeAttr = s.want
		case !errors.Is(err, kthread.ErrPermission) || !strings.Contains(err.Error(), "CAP_SYS_NICE"):
			t.Errorf("%s = %v, want ErrPermission saying how to grant it", s.name, err)
		default:
			if c, cerr := nw.Class(); c != before || cerr != nil {
				t.Errorf("after a refused %s: Class() = %v, %v; want %v, nil", s.name, c, cerr, before)
			}
			checkAttr(t, nw, beforeAttr)
		}
	}
	var nilWk *kthread.Worker
	if _, err := nilWk.Class(); !errors.Is(err, kthread.ErrInvalidArgument) {
		t.Errorf("nil Class() = %v, want ErrInvalidArgument", err)
	}
}

// TestClassKeptByReplacement: a class set with a setter is the class of
// the thread that replaces one lost to runtime.Goexit, also when it was
// set while the replacement was starting.
func TestClassKeptByReplacement(t *testing.T) {
	captureErrors(t)
	wk := newWorker(t, "kt-class-repl")
	n := testNice(t)
	for _, nice := range []int{n, n + 1, 19} {
		nice = min(nice, 19)
		if err := kthread.SetNormal(wk, nice); err != nil {
			t.Fatal(err)
		}
		x := kthread.NewWork(runtime.Goexit)
		wk.QueueWork(x)
		wk.FlushWork(x)
		waitFor(t, "the replacement thread", func() bool { return wk.TID() != 0 })
		checkClass(t, wk, sched.Attr{Policy: sched.PolicyNormal, Nice: nice})
	}
}

const niceChildEnv = "KTHREAD_TEST_NICE_CHILD"

// reniceAll sets every thread of this process to nice 19, as `nice -n 19`
// would have for a process started under it (setpriority(2) with a tid
// changes one thread; threads created later inherit the creator's nice).
func reniceAll() error {
	for range 100 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		done := true
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if a, err := sched.GetAttr(tid); err == nil && a.Nice == 19 {
				continue
			}
			done = false
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 19)
		}
		if done {
			return nil
		}
	}
	return errors.New("threads keep appearing at another nice")
}

// countingSlog counts the warnings log/slog receives.
type countingSlog struct {
	mu    sync.Mutex
	warns []string
}

func (h *countingSlog) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingSlog) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.mu.Lock()
		h.warns = append(h.warns, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *countingSlog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingSlog) WithGroup(string) slog.Handler      { return h }

func runChild(t *testing.T, who string, cmd *exec.Cmd) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	text := string(out)
	var exitErr *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exitErr):
		t.Skipf("%s: cannot start the test binary: %v", who, err)
	case strings.Contains(text, "SKIP:"):
		t.Skipf("%s: %s", who, strings.TrimSpace(text))
	case err != nil:
		t.Errorf("%s: %v\n%s", who, err, text)
	case !strings.Contains(text, "OK"):
		t.Errorf("%s gave no verdict:\n%s", who, text)
	default:
		t.Logf("%s: %s", who, strings.TrimSpace(text))
	}
}

// TestDefaultClassUnderNice runs the checks of niceChild in a child
// process at nice 19: as this user (root or not) and, when root, as
// nobody, who may not lower the nice: workers keep nice 19, Class says
// so with ErrPermission, it is reported once, and setters that would
// lower it are refused without changing anything.
func TestDefaultClassUnderNice(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), niceChildEnv+"=1")
	runChild(t, "this user", cmd)
	if os.Geteuid() == 0 {
		cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^$"}, niceChildEnv+"=1")
		runChild(t, "nobody", cmd)
	}
}

// TestSetterBetweenThreads: a setter called while the worker has no
// thread (here: from the error handler reporting runtime.Goexit, before
// the replacement starts) returns ErrPermission when no thread could get
// the class (checked on a probe thread), and otherwise records it for the
// replacement, which starts with it; TID reads 0 meanwhile.
func TestSetterBetweenThreads(t *testing.T) {
	n := testNice(t)
	var wk *kthread.Worker
	type call struct {
		tid int
		err error
	}
	for _, c := range []struct {
		name string
		set  func(*kthread.Worker) error
		ok   bool
		want sched.Attr
	}{
		{"SetNormal(up)", func(wk *kthread.Worker) error { return kthread.SetNormal(wk, min(n+3, 19)) }, true,
			sched.Attr{Policy: sched.PolicyNormal, Nice: min(n+3, 19)}},
		{"SetFIFOLow", kthread.SetFIFOLow, sched.CheckRT(1) == nil,
			sched.Attr{Policy: sched.PolicyFIFO, Priority: kthread.FIFOLowPriority}},
		{"SetNormal(-3)", func(wk *kthread.Worker) error { return kthread.SetNormal(wk, -3) }, canSetNice(-3),
			sched.Attr{Policy: sched.PolicyNormal, Nice: -3}},
	} {
		wk = newWorker(t, "kt-between", kthread.WithNice(n))
		calls := make(chan call, 1)
		kthread.SetErrorHandler(func(op, fn string, err error) {
			if errors.Is(err, kthread.ErrGoexit) {
				calls <- call{wk.TID(), c.set(wk)}
			}
		})
		x := kthread.NewWork(runtime.Goexit)
		wk.QueueWork(x)
		wk.FlushWork(x)
		kthread.SetErrorHandler(nil)
		got := <-calls
		if got.tid != 0 {
			t.Errorf("%s: TID() = %d while the worker had no thread, want 0", c.name, got.tid)
		}
		want := sched.Attr{Policy: sched.PolicyNormal, Nice: n}
		switch {
		case c.ok && got.err != nil:
			t.Errorf("%s between threads = %v, want nil", c.name, got.err)
		case !c.ok && !errors.Is(got.err, kthread.ErrPermission):
			t.Errorf("%s between threads = %v, want ErrPermission", c.name, got.err)
		case c.ok:
			want = c.want
		}
		waitFor(t, "the replacement", func() bool { return wk.TID() != 0 })
		checkClass(t, wk, want)
	}
}

func TestSchedClasses(t *testing.T) {
	plain := newWorker(t, "kt-plain")
	if canSetNice(0) {
		checkAttr(t, plain, sched.Attr{Policy: sched.PolicyNormal})
	} // else TestClassApplied checks the inherited nice
	n := testNice(t)
	nice := newWorker(t, "kt-nice", kthread.WithNice(n))
	checkAttr(t, nice, sched.Attr{Policy: sched.PolicyNormal, Nice: n})
	up := min(n+2, 19) // raising nice needs no privilege
	if err := kthread.SetNormal(nice, up); err != nil {
		t.Fatal(err)
	}
	checkAttr(t, nice, sched.Attr{Policy: sched.PolicyNormal, Nice: up})
	for _, bad := range []int{20, -21, 100} {
		if _, err := kthread.CreateWorker("kt-bad", kthread.WithNice(bad)); !errors.Is(err, kthread.ErrInvalidArgument) {
			t.Errorf("WithNice(%d) = %v, want ErrInvalidArgument", bad, err)
		}
		if err := kthread.SetNormal(nice, bad); !errors.Is(err, kthread.ErrInvalidArgument) {
			t.Errorf("SetNormal(%d) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	checkAttr(t, nice, sched.Attr{Policy: sched.PolicyNormal, Nice: up})

	needRT(t)
	fifo := newWorker(t, "kt-fifo", kthread.WithFIFO())
	checkAttr(t, fifo, sched.Attr{Policy: sched.PolicyFIFO, Priority: 50})
	low := newWorker(t, "kt-fifolow", kthread.WithFIFOLow())
	checkAttr(t, low, sched.Attr{Policy: sched.PolicyFIFO, Priority: 1})
	hn := newWorker(t, "kt-nice-neg", kthread.WithNice(-5))
	checkAttr(t, hn, sched.Attr{Policy: sched.PolicyNormal, Nice: -5})

	if err := kthread.SetFIFO(plain); err != nil {
		t.Fatal(err)
	}
	checkAttr(t, plain, sched.Attr{Policy: sched.PolicyFIFO, Priority: 50})
	if err := kthread.SetFIFOLow(plain); err != nil {
		t.Fatal(err)
	}
	checkAttr(t, plain, sched.Attr{Policy: sched.PolicyFIFO, Priority: 1})
	if err := kthread.SetNormal(plain, 0); err != nil {
		t.Fatal(err)
	}
	checkAttr(t, plain, sched.Attr{Policy: sched.PolicyNormal})
	// The items still run on the RT workers.
	for _, wk := range []*kthread.Worker{fifo, low} {
		var c counter
		w := kthread.NewWork(c.fn)
		wk.QueueWork(w)
		wk.FlushWork(w)
		if c.n.Load() != 1 || int(c.tid.Load()) != wk.TID() {
			t.Errorf("%s: item ran %d times on %d", wk.Name(), c.n.Load(), c.tid.Load())
		}
	}
}
