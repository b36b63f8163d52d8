package kthread_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(permChildEnv) != "" {
		os.Exit(permChild())
	}
	if os.Getenv(niceChildEnv) != "" {
		os.Exit(niceChild())
	}
	goleak.VerifyTestMain(m)
}

// waitFor polls cond for up to 10 s; generous so that slow machines pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, cond)
}

func newWorker(t *testing.T, name string, opts ...kthread.Option) *kthread.Worker {
	t.Helper()
	wk, err := kthread.CreateWorker(name, opts...)
	if err != nil {
		t.Fatalf("CreateWorker(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if err := wk.Destroy(); err != nil {
			t.Errorf("Destroy(%s): %v", name, err)
		}
	})
	return wk
}

// gate occupies a worker until opened, so that items queued behind it stay
// pending.
type gate struct {
	w       *kthread.Work
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func block(t *testing.T, wk *kthread.Worker) *gate {
	t.Helper()
	g := &gate{started: make(chan struct{}), release: make(chan struct{})}
	g.w = kthread.NewWork(func() {
		close(g.started)
		<-g.release
	})
	if !wk.QueueWork(g.w) {
		t.Fatal("QueueWork(gate) = false")
	}
	<-g.started
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

// errLog collects what the error handler reports during a test.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func captureErrors(t *testing.T) *errLog {
	l := &errLog{}
	kthread.SetErrorHandler(func(op, fn string, err error) {
		l.mu.Lock()
		l.errs = append(l.errs, fmt.Errorf("%s(%s): %w", op, fn, err))
		l.mu.Unlock()
	})
	t.Cleanup(func() { kthread.SetErrorHandler(nil) })
	return l
}

func (l *errLog) count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.errs)
}

func needRT(t *testing.T) {
	t.Helper()
	if err := sched.CheckRT(kthread.FIFOPriority); err != nil {
		t.Skipf("SCHED_FIFO not permitted here: %v", err)
	}
}

func checkAttr(t *testing.T, wk *kthread.Worker, want sched.Attr) {
	t.Helper()
	got, err := sched.GetAttr(wk.TID())
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s: sched_getattr = %+v, want %+v", wk.Name(), got, want)
	}
}

// canSetNice reports whether a thread of this process may be given nice n
// now (tried on a short-lived thread).
func canSetNice(n int) bool {
	return sched.Probe(nil, &sched.Attr{Policy: sched.PolicyNormal, Nice: n}) == nil
}

// mayLowerNice reports whether this process may lower a thread's nice
// to n from any higher value: CAP_SYS_NICE, or RLIMIT_NICE >= 20 - n.
func mayLowerNice(n int) bool {
	if sched.HasCapSysNice() {
		return true
	}
	var rl syscall.Rlimit
	const rlimitNice = 13 // RLIMIT_NICE
	return syscall.Getrlimit(rlimitNice, &rl) == nil && rl.Cur >= uint64(20-n)
}

// niceChild runs in a child process that reniced itself to 19; it
// checks the default class and the setters there and prints OK or FAIL
// lines.
func niceChild() int {
	var fails []string
	fail := func(f string, args ...any) { fails = append(fails, fmt.Sprintf(f, args...)) }
	if err := reniceAll(); err != nil {
		fmt.Println("SKIP: renice:", err)
		return 0
	}
	logs := &countingSlog{}
	slog.SetDefault(slog.New(logs))
	var mu sync.Mutex
	var reported []error
	kthread.SetErrorHandler(func(op, fn string, err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
	})
	privileged := canSetNice(0)
	normal := func(n int) sched.Attr { return sched.Attr{Policy: sched.PolicyNormal, Nice: n} }
	want := normal(0)
	if !privileged {
		want = normal(19)
	}
	check := func(wk *kthread.Worker) {
		if a, err := sched.GetAttr(wk.TID()); err != nil || a != want {
			fail("%s: thread runs %+v (%v), want %+v", wk.Name(), a, err, want)
		}
		c, err := wk.Class()
		if c.Nice != want.Nice || c.Policy != "SCHED_OTHER" {
			fail("%s: Class() = %v, want nice %d", wk.Name(), c, want.Nice)
		}
		switch {
		case privileged && err != nil:
			fail("%s: Class() error %v, want nil", wk.Name(), err)
		case !privileged && (!errors.Is(err, kthread.ErrPermission) || !strings.Contains(err.Error(), "CAP_SYS_NICE")):
			fail("%s: Class() error %v, want ErrPermission saying how to grant it", wk.Name(), err)
		}
	}
	var workers []*kthread.Worker
	for i := range 3 {
		wk, err := kthread.CreateWorker("kt-niced-" + strconv.Itoa(i))
		if err != nil {
			fail("CreateWorker: %v", err)
			continue
		}
		workers = append(workers, wk)
	}
	if wk, err := kthread.CreateWorkerOnCPU(wq.OnlineCPUs()[0], "kt-niced-cpu"); err != nil {
		fail("CreateWorkerOnCPU: %v", err)
	} else {
		workers = append(workers, wk)
	}
	for _, wk := range workers {
		check(wk)
	}
	if len(workers) > 0 { // a replacement thread gets the same
		x := kthread.NewWork(runtime.Goexit)
		workers[0].QueueWork(x)
		workers[0].FlushWork(x)
		for workers[0].TID() == 0 {
			runtime.Gosched()
		}
		check(workers[0])
	}
	if fb, err := wq.Alloc("kt-niced-fb", wq.Unbound, 0); err == nil {
		if s, err := kthread.NewPerCPU("kt-niced-pcpu", wqfallback.Queue(fb)); err != nil {
			fail("NewPerCPU: %v", err)
		} else {
			for _, c := range s.CPUs() {
				check(s.Worker(c))
			}
			_ = s.Destroy()
		}
		fb.Destroy()
	}
	// Explicit classes: refused when they need privilege, never degraded.
	if wk, err := kthread.CreateWorker("kt-niced-5", kthread.WithNice(5)); privileged && err != nil {
		fail("WithNice(5) = %v", err)
	} else if !privileged && !errors.Is(err, kthread.ErrPermission) {
		fail("WithNice(5) = %v, want ErrPermission", err)
	} else if wk != nil {
		_ = wk.Destroy()
	}
	if len(workers) > 0 {
		wk := workers[len(workers)-1]
		before, beforeErr := wk.Class()
		err := kthread.SetNormal(wk, 0)
		switch {
		case privileged && err != nil:
			fail("SetNormal(0) = %v", err)
		case !privileged && !errors.Is(err, kthread.ErrPermission):
			fail("SetNormal(0) = %v, want ErrPermission", err)
		case !privileged:
			if c, cerr := wk.Class(); c != before || (cerr == nil) != (beforeErr == nil) {
				fail("after a refused SetNormal(0): Class() = %v, %v; want %v, %v", c, cerr, before, beforeErr)
			}
			check(wk)
		}
		if err := kthread.SetNormal(wk, 19); err != nil {
			fail("SetNormal(19) = %v", err)
		} else if c, err := wk.Class(); c.Nice != 19 || err != nil {
			fail("after SetNormal(19): Class() = %v, %v; want nice 19, nil", c, err)
		}
	}
	for _, wk := range workers {
		_ = wk.Destroy()
	}
	mu.Lock()
	nrep := 0
	for _, e := range reported {
		if errors.Is(e, kthread.ErrPermission) {
			nrep++
		}
	}
	mu.Unlock()
	logs.mu.Lock()
	nlog := len(logs.warns)
	logs.mu.Unlock()
	wantReports := 1
	if privileged {
		wantReports = 0
	}
	if nrep != wantReports || nlog != wantReports {
		fail("default class reported %d times to the error handler and %d to log/slog, want %d each (once): %v",
			nrep, nlog, wantReports, reported)
	}
	for _, f := range fails {
		fmt.Println("FAIL:", f)
	}
	if len(fails) > 0 {
		return 1
	}
	fmt.Println("OK privileged =", privileged)
	return 0
}

// testNice is a nice value that this process may give a worker: 5, or the
// process's own nice when it runs niced above that without the privilege
// to lower it (`nice -n 19 go test` as an unprivileged user).
func testNice(t *testing.T) int {
	t.Helper()
	a, err := sched.GetAttr(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return max(5, a.Nice)
}

// permChild runs in the unprivileged child process.
func permChild() int {
	if sched.CheckRT(1) == nil || sched.CheckNice(-5) == nil {
		fmt.Println("SKIP: this process may use SCHED_FIFO or negative nice without CAP_SYS_NICE (RLIMIT_RTPRIO/RLIMIT_NICE)")
		return 0
	}
	fails := checkRefused()
	for _, f := range fails {
		fmt.Println("FAIL:", f)
	}
	if len(fails) > 0 {
		return 1
	}
	fmt.Println("OK")
	return 0
}

// within runs f on a goroutine and fails the test if it has not returned
// after 10 s (generous: it must return at once), so that a regression
// fails instead of hanging the suite.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	testutil.MustReturn(t, what, f)
}

// newFallback allocates an ordinary unbound workqueue (no privilege
// needed) for a PerCPU set.
func newFallback(t *testing.T, name string) *wq.Workqueue {
	t.Helper()
	// Threads: the tests tell the fallback's items by their kworker thread.
	q, err := wq.Alloc(name, wq.Unbound, 0, wq.Threads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	return q
}

func newPerCPU(t *testing.T, name string, fb *wq.Workqueue, opts ...kthread.Option) *kthread.PerCPU {
	t.Helper()
	s, err := kthread.NewPerCPU(name, wqfallback.Queue(fb), opts...)
	if err != nil {
		t.Fatalf("NewPerCPU(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	return s
}

// counter is a work function that counts its runs and the thread it ran on.
type counter struct {
	n   atomic.Int32
	tid atomic.Int64
}

func (c *counter) fn() {
	c.tid.Store(int64(sched.Gettid()))
	c.n.Add(1)
}
