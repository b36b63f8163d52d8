package kthread_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
)

// setters are the class setters, each as a function of a worker.
var setters = []struct {
	name string
	set  func(*kthread.Worker) error
}{
	{"SetFIFO", kthread.SetFIFO},
	{"SetFIFOLow", kthread.SetFIFOLow},
	{"SetNormal(0)", func(wk *kthread.Worker) error { return kthread.SetNormal(wk, 0) }},
	{"SetNormal(10)", func(wk *kthread.Worker) error { return kthread.SetNormal(wk, 10) }},
}

// TestTIDAfterDestroy: once Destroy has returned the worker has no thread,
// TID reads 0 and every setter returns ErrDestroyed, for workers of every
// kind, also one whose thread was replaced.
func TestTIDAfterDestroy(t *testing.T) {
	errs := captureErrors(t)
	cpu := wq.OnlineCPUs()[0]
	cases := []struct {
		name   string
		create func() (*kthread.Worker, error)
		goexit bool
	}{
		{"plain", func() (*kthread.Worker, error) { return kthread.CreateWorker("kt-tid") }, false},
		{"on-cpu", func() (*kthread.Worker, error) { return kthread.CreateWorkerOnCPU(cpu, "kt-tid") }, false},
		{"nice", func() (*kthread.Worker, error) {
			return kthread.CreateWorker("kt-tid-nice", kthread.WithNice(max(15, testNice(t))))
		}, false},
		{"replaced", func() (*kthread.Worker, error) { return kthread.CreateWorker("kt-tid-goexit") }, true},
	}
	for _, c := range cases {
		wk, err := c.create()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tid := wk.TID()
		if tid == 0 || !sched.ProcessAlive(tid) {
			t.Fatalf("%s: TID() = %d, not a live thread", c.name, tid)
		}
		if c.goexit {
			x := kthread.NewWork(runtime.Goexit)
			wk.QueueWork(x)
			wk.FlushWork(x)
			waitFor(t, "the replacement thread", func() bool { return wk.TID() != 0 })
			if wk.TID() == tid {
				t.Errorf("%s: TID() still %d after runtime.Goexit", c.name, tid)
			}
			waitFor(t, "the old thread to exit", func() bool { return !sched.ProcessAlive(tid) })
			tid = wk.TID()
		}
		if err := wk.Destroy(); err != nil {
			t.Fatalf("%s: Destroy: %v", c.name, err)
		}
		if got := wk.TID(); got != 0 {
			t.Errorf("%s: TID() = %d after Destroy, want 0 (thread %d has exited)", c.name, got, tid)
		}
		waitFor(t, "the thread to exit", func() bool { return !sched.ProcessAlive(tid) })
		for _, s := range setters {
			if err := s.set(wk); !errors.Is(err, kthread.ErrDestroyed) {
				t.Errorf("%s: %s after Destroy = %v, want ErrDestroyed", c.name, s.name, err)
			}
		}
	}
	if got := errs.count(kthread.ErrGoexit); got != 1 {
		t.Errorf("ErrGoexit reported %d times, want 1: %v", got, errs.all())
	}
}

// TestIdentityIgnoresNames: a goroutine on a thread that merely carries
// the worker's name (names repeat) is not the worker: its FlushWork,
// CancelWorkSync, FlushWorker and Destroy wait as for anybody else, and
// ErrDeadlock is not reported.
func TestIdentityIgnoresNames(t *testing.T) {
	errs := captureErrors(t)
	for _, name := range []string{"kt-same-name", "a-name-longer-than-15-bytes"} {
		wk, err := kthread.CreateWorker(name)
		if err != nil {
			t.Fatal(err)
		}
		var c counter
		w := kthread.NewWork(c.fn)
		g := block(t, wk)
		wk.QueueWork(w)
		type result struct{ flushed, cancelled bool }
		res := make(chan result)
		destroyed := make(chan error)
		tidc := make(chan int, 1)
		sched.GoLocked(func() {
			_ = sched.SetName(name) // the same thread name as the worker's
			tidc <- sched.Gettid()
			var r result
			r.flushed = wk.FlushWork(w) // w is pending behind the gate: waits
			wk.QueueWork(w)
			wk.FlushWorker()
			r.cancelled = wk.CancelWorkSync(w)
			res <- r
			destroyed <- wk.Destroy()
		})
		// Open the gate once FlushWork waits (its locked thread sleeps):
		// opened before, w could run and end first, and FlushWork would
		// rightly find it idle.
		waitSleeping(t, <-tidc)
		g.open()
		r := <-res
		if err := <-destroyed; err != nil {
			t.Errorf("%s: Destroy from a same-named thread = %v, want nil", name, err)
		}
		if !r.flushed || r.cancelled || c.n.Load() != 2 {
			t.Errorf("%s: FlushWork = %v, CancelWorkSync = %v, runs %d; want true, false, 2", name, r.flushed, r.cancelled, c.n.Load())
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != 0 {
		t.Errorf("ErrDeadlock reported %d times for a thread that only shares the name: %v", got, errs.all())
	}
}

// TestSelfCallsOnReplacementThread: after a Goexit replaced the thread,
// the new thread is the worker: waits from its items return ErrDeadlock
// instead of hanging, and the old, dead thread is not.
func TestSelfCallsOnReplacementThread(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-self-repl")
	for round := range 3 {
		x := kthread.NewWork(runtime.Goexit)
		wk.QueueWork(x)
		wk.FlushWork(x)
		var flushed, cancelled atomic.Bool
		var destroyErr atomic.Value
		var w *kthread.Work
		w = kthread.NewWork(func() {
			flushed.Store(wk.FlushWork(w))
			wk.FlushWorker()
			cancelled.Store(wk.CancelWorkSync(w))
			destroyErr.Store(wk.Destroy())
		})
		wk.QueueWork(w)
		wk.FlushWorker()
		if flushed.Load() || cancelled.Load() {
			t.Errorf("round %d: FlushWork(self) = %v, CancelWorkSync(self) = %v; want false", round, flushed.Load(), cancelled.Load())
		}
		if err, _ := destroyErr.Load().(error); !errors.Is(err, kthread.ErrDeadlock) {
			t.Errorf("round %d: Destroy from own item = %v, want ErrDeadlock", round, err)
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != 12 {
		t.Errorf("ErrDeadlock reported %d times, want 12: %v", got, errs.all())
	}
}

// waitSleeping waits (up to 30 s) until thread tid is seen asleep twice in
// a row, 1 ms apart.
func waitSleeping(t *testing.T, tid int) {
	t.Helper()
	sr, err := sched.OpenStat(tid)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	seen := 0
	for deadline := time.Now().Add(30 * time.Second); seen < 2; time.Sleep(time.Millisecond) {
		st, err := sr.State()
		if err != nil {
			t.Fatal(err)
		}
		if sched.Sleeping(st) {
			seen++
		} else {
			seen = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d never went to sleep (state %c)", tid, st)
		}
	}
}
