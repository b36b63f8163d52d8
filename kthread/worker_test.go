package kthread_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

func TestQueueWorkReturnValues(t *testing.T) {
	wk := newWorker(t, "kt-queue")
	var c counter
	w := kthread.NewWork(c.fn)
	g := block(t, wk)
	if !wk.QueueWork(w) {
		t.Fatal("QueueWork(idle) = false, want true")
	}
	if !w.Pending() {
		t.Error("Pending() = false after QueueWork")
	}
	if wk.QueueWork(w) {
		t.Fatal("QueueWork(pending) = true, want false")
	}
	g.open()
	wk.FlushWork(w)
	if got := c.n.Load(); got != 1 {
		t.Fatalf("ran %d times, want 1", got)
	}
	if got, want := int(c.tid.Load()), wk.TID(); got != want {
		t.Errorf("ran on thread %d, want the worker's %d", got, want)
	}
	if w.Pending() {
		t.Error("Pending() = true after it ran")
	}
	if !wk.QueueWork(w) {
		t.Fatal("QueueWork(idle again) = false")
	}
	wk.FlushWorker()
	if got := c.n.Load(); got != 2 {
		t.Fatalf("ran %d times, want 2", got)
	}
}

func TestQueueErrors(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-qerr")
	if wk.QueueWork(&kthread.Work{}) {
		t.Error("QueueWork(zero Work) = true")
	}
	if wk.QueueWork(nil) {
		t.Error("QueueWork(nil) = true")
	}
	if wk.QueueDelayedWork(nil, time.Millisecond) || wk.ModDelayedWork(nil, 0) {
		t.Error("delayed queue of nil = true")
	}
	var half kthread.DelayedWork
	half.Work.Init(func() {}) // a function but no timer
	if wk.QueueDelayedWork(&half, time.Millisecond) || wk.ModDelayedWork(&half, 0) {
		t.Error("delayed queue of an item without DelayedWork.Init = true")
	}
	if got := errs.count(kthread.ErrNoFunc); got != 6 {
		t.Errorf("ErrNoFunc reported %d times, want 6: %v", got, errs.all())
	}
	var nilWk *kthread.Worker
	if nilWk.QueueWork(kthread.NewWork(func() {})) {
		t.Error("nil worker QueueWork = true")
	}
	if err := nilWk.Destroy(); !errors.Is(err, kthread.ErrInvalidArgument) {
		t.Errorf("nil Destroy = %v, want ErrInvalidArgument", err)
	}
}

func TestFlushWork(t *testing.T) {
	wk := newWorker(t, "kt-flush")
	if wk.FlushWork(kthread.NewWork(func() {})) {
		t.Error("FlushWork(never queued) = true")
	}

	// Running: FlushWork waits for the running instance.
	started, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	w := kthread.NewWork(func() {
		close(started)
		<-release
		done.Store(true)
	})
	wk.QueueWork(w)
	<-started
	res := make(chan bool)
	go func() { res <- wk.FlushWork(w) }()
	waitFor(t, "the flush barrier", func() bool { return kthread.Queued(wk) == 1 })
	close(release)
	if !<-res {
		t.Error("FlushWork(running) = false")
	}
	if !done.Load() {
		t.Error("FlushWork returned before the running instance finished")
	}
	if wk.FlushWork(w) {
		t.Error("FlushWork(idle after run) = true")
	}

	// Pending behind other work: waits for w only, not for what was queued
	// after it.
	g := block(t, wk)
	var c counter
	w2 := kthread.NewWork(c.fn)
	wk.QueueWork(w2)
	laterRelease := make(chan struct{})
	later := kthread.NewWork(func() { <-laterRelease })
	wk.QueueWork(later)
	go func() { res <- wk.FlushWork(w2) }()
	waitFor(t, "the flush barrier", func() bool { return kthread.Queued(wk) == 3 })
	g.open()
	if !<-res {
		t.Error("FlushWork(pending) = false")
	}
	if c.n.Load() != 1 {
		t.Error("FlushWork returned before the item ran")
	}
	// FlushWork(w2) returned although the later item has not finished
	// (it waits for laterRelease): the barrier went right after w2.
	close(laterRelease)
	wk.FlushWorker()
}

func TestFlushWorker(t *testing.T) {
	wk := newWorker(t, "kt-flushwk")
	g := block(t, wk)
	var cs [10]counter
	for i := range cs {
		wk.QueueWork(kthread.NewWork(cs[i].fn))
	}
	done := make(chan struct{})
	go func() { wk.FlushWorker(); close(done) }()
	waitFor(t, "the flush barrier", func() bool { return kthread.Queued(wk) == len(cs)+1 })
	g.open()
	<-done
	for i := range cs {
		if cs[i].n.Load() != 1 {
			t.Fatalf("item %d ran %d times when FlushWorker returned, want 1", i, cs[i].n.Load())
		}
	}
}

func TestCancelWorkSync(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-cancel")
	if wk.CancelWorkSync(kthread.NewWork(func() {})) {
		t.Error("CancelWorkSync(never queued) = true")
	}

	// Pending: removed, never runs.
	g := block(t, wk)
	var c counter
	w := kthread.NewWork(c.fn)
	wk.QueueWork(w)
	if !wk.CancelWorkSync(w) {
		t.Error("CancelWorkSync(pending) = false")
	}
	if wk.CancelWorkSync(w) {
		t.Error("CancelWorkSync(cancelled) = true")
	}
	g.open()
	wk.FlushWorker()
	if c.n.Load() != 0 {
		t.Errorf("cancelled item ran %d times", c.n.Load())
	}

	// Running and pending again: cancels the pending instance, waits for
	// the running one and blocks queueing meanwhile.
	started, release := make(chan struct{}, 2), make(chan struct{})
	var runs, finished atomic.Int32
	r := kthread.NewWork(func() {
		runs.Add(1)
		started <- struct{}{}
		<-release
		finished.Add(1)
	})
	wk.QueueWork(r)
	<-started
	if !wk.QueueWork(r) {
		t.Fatal("QueueWork(running) = false, want true (requeue)")
	}
	res := make(chan bool)
	go func() { res <- wk.CancelWorkSync(r) }()
	waitFor(t, "cancel to wait for the running instance", func() bool { return kthread.Canceling(r) > 0 })
	if wk.QueueWork(r) {
		t.Error("QueueWork during CancelWorkSync = true, want false")
	}
	close(release)
	if !<-res {
		t.Error("CancelWorkSync(running+pending) = false, want true")
	}
	if finished.Load() != 1 {
		t.Errorf("CancelWorkSync returned with %d finished instances, want 1", finished.Load())
	}
	wk.FlushWorker()
	if runs.Load() != 1 {
		t.Errorf("item ran %d times, want 1 (the requeue was cancelled)", runs.Load())
	}
	if got := len(errs.all()); got != 0 {
		t.Errorf("unexpected errors: %v", errs.all())
	}
}

func TestDelayedWork(t *testing.T) {
	wk := newWorker(t, "kt-delayed")
	var c counter
	dw := kthread.NewDelayedWork(c.fn)

	if !wk.QueueDelayedWork(dw, time.Hour) {
		t.Fatal("QueueDelayedWork(idle) = false")
	}
	if wk.QueueDelayedWork(dw, time.Hour) {
		t.Error("QueueDelayedWork(armed) = true")
	}
	if !dw.Pending() {
		t.Error("armed item not Pending")
	}
	if !wk.ModDelayedWork(dw, 0) {
		t.Error("ModDelayedWork(armed, 0) = false, want true (was pending)")
	}
	wk.FlushWork(&dw.Work)
	if c.n.Load() != 1 {
		t.Fatalf("ran %d times after ModDelayedWork(0), want 1", c.n.Load())
	}

	if wk.ModDelayedWork(dw, time.Hour) {
		t.Error("ModDelayedWork(idle) = true, want false")
	}
	if !dw.Pending() {
		t.Error("ModDelayedWork(idle) did not arm the item")
	}
	if !wk.CancelDelayedWorkSync(dw) {
		t.Error("CancelDelayedWorkSync(armed) = false")
	}
	if wk.CancelDelayedWorkSync(dw) {
		t.Error("CancelDelayedWorkSync(idle) = true")
	}

	// Queued on the worklist (worker busy): ModDelayedWork moves it back to
	// the timer.
	g := block(t, wk)
	if !wk.QueueDelayedWork(dw, 0) {
		t.Fatal("QueueDelayedWork(0) = false")
	}
	if !wk.ModDelayedWork(dw, time.Hour) {
		t.Error("ModDelayedWork(queued) = false")
	}
	g.open()
	wk.FlushWorker()
	if c.n.Load() != 1 {
		t.Errorf("item re-armed for 1h ran anyway (%d runs)", c.n.Load())
	}
	// FlushWork of an armed item queues it now and waits.
	if !wk.FlushWork(&dw.Work) {
		t.Error("FlushWork(armed) = false")
	}
	if c.n.Load() != 2 {
		t.Errorf("after FlushWork(armed) ran %d times, want 2", c.n.Load())
	}

	// A short delay fires on its own.
	if !wk.QueueDelayedWork(dw, time.Millisecond) {
		t.Fatal("QueueDelayedWork(1ms) = false")
	}
	waitFor(t, "the delayed item to run", func() bool { return c.n.Load() == 3 })

	// Repeated modification races with timers that are firing (stale
	// callbacks); with the worker held, the item stays pending throughout
	// and, once released, runs exactly once and ends idle.
	g = block(t, wk)
	for i := 0; i < 200; i++ {
		if i > 0 && !wk.ModDelayedWork(dw, time.Duration(i%3)*time.Microsecond) {
			t.Fatalf("ModDelayedWork #%d = false, want true (pending)", i)
		} else if i == 0 && wk.ModDelayedWork(dw, 0) {
			t.Fatal("ModDelayedWork(idle) = true")
		}
	}
	wk.ModDelayedWork(dw, time.Microsecond)
	g.open()
	waitFor(t, "the modified item to run", func() bool { return c.n.Load() == 4 && !dw.Pending() })
	wk.FlushWorker()
	if got := c.n.Load(); got != 4 {
		t.Errorf("after 200 modifications ran %d times in all, want 4", got)
	}
}

func TestWorkAttachedToOneWorker(t *testing.T) {
	errs := captureErrors(t)
	a := newWorker(t, "kt-a")
	b := newWorker(t, "kt-b")
	var c counter
	w := kthread.NewWork(c.fn)
	g := block(t, a)
	if !a.QueueWork(w) {
		t.Fatal("QueueWork on a = false")
	}
	if b.QueueWork(w) {
		t.Error("QueueWork on b while pending on a = true")
	}
	if got := errs.count(kthread.ErrOtherWorker); got != 1 {
		t.Errorf("ErrOtherWorker reported %d times, want 1", got)
	}
	g.open()
	a.FlushWork(w)
	if !b.QueueWork(w) {
		t.Fatal("QueueWork on b after w went idle = false")
	}
	b.FlushWork(w)
	if got := int(c.tid.Load()); got != b.TID() || c.n.Load() != 2 {
		t.Errorf("second run on thread %d (b is %d), %d runs", got, b.TID(), c.n.Load())
	}
}

func TestDeadlockReported(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-deadlock")
	var flushSelf, cancelSelf bool
	var destroyErr error
	var w *kthread.Work
	w = kthread.NewWork(func() {
		flushSelf = wk.FlushWork(w)
		wk.FlushWorker()
		cancelSelf = wk.CancelWorkSync(w)
		destroyErr = wk.Destroy()
	})
	wk.QueueWork(w)
	wk.FlushWorker()
	if flushSelf || cancelSelf {
		t.Errorf("FlushWork(self) = %v, CancelWorkSync(self) = %v; want false, false", flushSelf, cancelSelf)
	}
	if !errors.Is(destroyErr, kthread.ErrDeadlock) {
		t.Errorf("Destroy from own work = %v, want ErrDeadlock", destroyErr)
	}
	if got := errs.count(kthread.ErrDeadlock); got != 4 {
		t.Errorf("ErrDeadlock reported %d times, want 4: %v", got, errs.all())
	}
	if !wk.QueueWork(kthread.NewWork(func() {})) {
		t.Error("worker unusable after a refused self-Destroy")
	}
}

func TestDestroyWhileBusy(t *testing.T) {
	errs := captureErrors(t)
	wk, err := kthread.CreateWorker("kt-destroy")
	if err != nil {
		t.Fatal(err)
	}
	g := block(t, wk)
	const n = 50
	var cs [n]counter
	for i := range cs {
		if !wk.QueueWork(kthread.NewWork(cs[i].fn)) {
			t.Fatalf("QueueWork(%d) = false", i)
		}
	}
	// An item that requeues itself once from its own function during the
	// drain: accepted, as in the kernel.
	var again *kthread.Work
	var againRuns atomic.Int32
	var requeued atomic.Bool
	again = kthread.NewWork(func() {
		if againRuns.Add(1) == 1 {
			requeued.Store(wk.QueueWork(again))
		}
	})
	wk.QueueWork(again)

	res := make(chan error)
	go func() { res <- wk.Destroy() }()
	waitFor(t, "Destroy to begin", func() bool { return kthread.Dying(wk) })
	var late counter
	lw := kthread.NewWork(late.fn)
	if wk.QueueWork(lw) {
		t.Error("QueueWork during Destroy = true")
	}
	g.open()
	if err := <-res; err != nil {
		t.Fatalf("Destroy = %v", err)
	}
	for i := range cs {
		if cs[i].n.Load() != 1 {
			t.Fatalf("item %d ran %d times when Destroy returned, want 1", i, cs[i].n.Load())
		}
	}
	if !requeued.Load() || againRuns.Load() != 2 {
		t.Errorf("self-requeue during destroy: accepted=%v, runs=%d; want true, 2", requeued.Load(), againRuns.Load())
	}
	if late.n.Load() != 0 || lw.Pending() {
		t.Error("item refused during Destroy ran or stayed pending")
	}
	if got := errs.count(kthread.ErrDestroyed); got != 1 {
		t.Errorf("ErrDestroyed reported %d times, want 1", got)
	}
}

func TestUseAfterDestroy(t *testing.T) {
	errs := captureErrors(t)
	wk, err := kthread.CreateWorker("kt-uad")
	if err != nil {
		t.Fatal(err)
	}
	if err := wk.Destroy(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the worker thread to exit", func() bool { return !sched.ProcessAlive(wk.TID()) })
	var c counter
	w := kthread.NewWork(c.fn)
	dw := kthread.NewDelayedWork(c.fn)
	if wk.QueueWork(w) || wk.QueueWork(w) || wk.QueueDelayedWork(dw, 0) || wk.ModDelayedWork(dw, time.Millisecond) {
		t.Error("queueing on a destroyed worker returned true")
	}
	if w.Pending() || dw.Pending() {
		t.Error("refused item left pending")
	}
	wk.FlushWorker() // must not hang
	if wk.FlushWork(w) || wk.CancelWorkSync(w) || wk.CancelDelayedWorkSync(dw) {
		t.Error("flush/cancel of a refused item = true")
	}
	if err := wk.Destroy(); err != nil {
		t.Errorf("second Destroy = %v", err)
	}
	if err := kthread.SetFIFOLow(wk); !errors.Is(err, kthread.ErrDestroyed) {
		t.Errorf("SetFIFOLow(destroyed) = %v, want ErrDestroyed", err)
	}
	if got := errs.count(kthread.ErrDestroyed); got != 1 {
		t.Errorf("ErrDestroyed reported %d times, want 1 (once per worker): %v", got, errs.all())
	}
	if c.n.Load() != 0 {
		t.Error("refused item ran")
	}
}

func TestDestroyCancelsArmedDelayedWork(t *testing.T) {
	wk, err := kthread.CreateWorker("kt-dpend")
	if err != nil {
		t.Fatal(err)
	}
	var c counter
	dw := kthread.NewDelayedWork(c.fn)
	wk.QueueDelayedWork(dw, time.Hour)
	err = wk.Destroy()
	if !errors.Is(err, kthread.ErrDelayedPending) {
		t.Fatalf("Destroy with armed delayed work = %v, want ErrDelayedPending", err)
	}
	if !strings.Contains(err.Error(), "counter") {
		t.Errorf("error %q does not name the cancelled function", err)
	}
	if dw.Pending() {
		t.Error("cancelled delayed item still pending")
	}
	// The item is idle and may be used on another worker.
	wk2 := newWorker(t, "kt-dpend2")
	if !wk2.QueueDelayedWork(dw, 0) {
		t.Fatal("requeue on another worker = false")
	}
	wk2.FlushWork(&dw.Work)
	if c.n.Load() != 1 {
		t.Errorf("ran %d times, want 1", c.n.Load())
	}
}

func TestThreadNames(t *testing.T) {
	long := "abcdefghijklmnopqrstuvwxyz"
	wk := newWorker(t, long)
	if wk.Name() != long {
		t.Errorf("Name() = %q", wk.Name())
	}
	if name, err := sched.ThreadName(wk.TID()); err != nil || name != long[:15] {
		t.Errorf("thread name %q (%v), want %q", name, err, long[:15])
	}
	if wk.CPU() != -1 {
		t.Errorf("CPU() = %d for an unbound worker", wk.CPU())
	}
	if _, err := kthread.CreateWorker(""); !errors.Is(err, kthread.ErrInvalidArgument) {
		t.Errorf("CreateWorker(\"\") = %v, want ErrInvalidArgument", err)
	}
}

func TestCreateWorkerOnCPU(t *testing.T) {
	for _, cpu := range wq.OnlineCPUs() {
		wk, err := kthread.CreateWorkerOnCPU(cpu, "kt-cpu")
		if err != nil {
			t.Fatalf("CreateWorkerOnCPU(%d): %v", cpu, err)
		}
		aff, err := sched.Affinity(wk.TID())
		if err != nil || !slices.Equal(aff, []int{cpu}) {
			t.Errorf("worker on CPU %d: affinity %v (%v)", cpu, aff, err)
		}
		want := fmt.Sprintf("kt-cpu/%d", cpu)
		if name, _ := sched.ThreadName(wk.TID()); name != want || wk.Name() != want || wk.CPU() != cpu {
			t.Errorf("worker on CPU %d: thread name %q, Name %q, CPU %d", cpu, name, wk.Name(), wk.CPU())
		}
		var ranOn atomic.Int32
		ranOn.Store(-1)
		w := kthread.NewWork(func() { ranOn.Store(int32(sched.GetCPU())) })
		wk.QueueWork(w)
		wk.FlushWork(w)
		if got := int(ranOn.Load()); got != cpu {
			t.Errorf("item of the worker on CPU %d ran on CPU %d", cpu, got)
		}
		if err := wk.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []int{-1, 1000, 1 << 20} {
		if wk, err := kthread.CreateWorkerOnCPU(bad, "kt-bad"); !errors.Is(err, kthread.ErrInvalidCPU) {
			t.Errorf("CreateWorkerOnCPU(%d) = %v, want ErrInvalidCPU", bad, err)
			if wk != nil {
				_ = wk.Destroy()
			}
		}
	}
}

func TestQueueDoesNotAllocate(t *testing.T) {
	wk := newWorker(t, "kt-alloc")
	s := newPerCPU(t, "kt-alloc", newFallback(t, "kt-alloc-wq"))
	cpu := s.CPUs()[0]
	block(t, wk)
	block(t, s.Worker(cpu))
	w := kthread.NewWork(func() {})
	dw := kthread.NewDelayedWork(func() {})
	if n := testing.AllocsPerRun(100, func() {
		if !wk.QueueWork(w) || !wk.CancelWorkSync(w) {
			t.Fatal("queue/cancel failed")
		}
		if wk.ModDelayedWork(dw, time.Hour) || !wk.CancelDelayedWorkSync(dw) {
			t.Fatal("mod/cancel failed")
		}
	}); n != 0 {
		t.Errorf("QueueWork/ModDelayedWork allocate %.1f times per run", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if !s.Queue(cpu, w) || !s.CancelWorkSync(w) {
			t.Fatal("PerCPU queue/cancel failed")
		}
	}); n != 0 {
		t.Errorf("PerCPU.Queue allocates %.1f times per run", n)
	}
}

// TestModDelayedRacingExpiryRunsOnceOrTwice: ModDelayedWork with delays of a few us
// races the timer's expiry (the stale-callback count), on Go timers and
// on the RT timer thread; after each round's FlushWork the item ran once
// or twice (twice when the first arming fired and ran before the second
// ModDelayedWork), never zero times (lost) nor three (fired twice).
func TestModDelayedRacingExpiryRunsOnceOrTwice(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
	}{{"normal", nil}, {"fifo-low", []kthread.Option{kthread.WithFIFOLow()}}} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-rev-mod", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = wk.Destroy() }()
			var runs atomic.Int32
			dw := kthread.NewDelayedWork(func() { runs.Add(1) })
			for i := range 2000 {
				r0 := runs.Load()
				wk.ModDelayedWork(dw, time.Duration(i%7)*time.Microsecond)
				for range i % 3 {
					runtime.Gosched()
				}
				wk.ModDelayedWork(dw, time.Duration(i%5)*3*time.Microsecond)
				wk.FlushWork(&dw.Work)
				if n := runs.Load() - r0; n < 1 || n > 2 {
					t.Fatalf("round %d: the item ran %d times (want 1 or 2)", i, n)
				}
				if i%4 == 0 {
					wk.ModDelayedWork(dw, time.Duration(i%7)*time.Microsecond)
					wk.CancelDelayedWorkSync(dw)
					r1 := runs.Load()
					wk.FlushWork(&dw.Work)
					if runs.Load() != r1 {
						t.Fatalf("round %d: ran after CancelDelayedWorkSync", i)
					}
				}
			}
		})
	}
}

// selfCalls are the calls a delayed item makes on itself from its own
// function while a CancelDelayedWorkSync of it waits, with the kernel's
// answers: while a canceller holds the item, mod_delayed_work returns true
// without queueing, queueing returns false, cancel returns false, and the
// waits that would wait for the caller return at once (ErrDeadlock).
type selfCalls struct {
	mod, queue, queueDelayed, flush, cancel, cancelDelayed bool
	destroy                                                error
}

func (s selfCalls) check(t *testing.T, name string) {
	t.Helper()
	want := selfCalls{mod: true}
	if !errors.Is(s.destroy, kthread.ErrDeadlock) {
		t.Errorf("%s: Destroy from the item = %v, want ErrDeadlock", name, s.destroy)
	}
	s.destroy = nil
	if s != want {
		t.Errorf("%s: from the item while a canceller waits: %+v, want %+v", name, s, want)
	}
}

// TestSelfCallsWhileCancelling: an item's calls on itself from its own
// function while another goroutine waits in CancelDelayedWorkSync (or
// CancelWorkSync) return at once with the kernel's values, the canceller
// returns, and the item does not run again; with the item armed (pending)
// or not when the cancel began, and through both cancel calls.
func TestSelfCallsWhileCancelling(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-selfcancel")
	deadlocks := 0
	for _, c := range []struct {
		name        string
		armedBefore bool // the item re-armed itself before the cancel began
		delayed     bool // CancelDelayedWorkSync, else CancelWorkSync
		delay       time.Duration
	}{
		{"running", false, true, time.Millisecond},
		{"running+armed", true, true, time.Millisecond},
		{"running+queued", true, true, 0},
		{"running/cancel_work_sync", false, false, time.Millisecond},
		{"running+armed/cancel_work_sync", true, false, time.Hour},
	} {
		var dw *kthread.DelayedWork
		var runs atomic.Int32
		started, release := make(chan struct{}), make(chan struct{})
		var got selfCalls
		dw = kthread.NewDelayedWork(func() {
			if runs.Add(1) > 1 {
				return
			}
			if c.armedBefore {
				wk.ModDelayedWork(dw, c.delay)
			}
			close(started)
			<-release
			got.mod = wk.ModDelayedWork(dw, c.delay)
			got.queue = wk.QueueWork(&dw.Work)
			got.queueDelayed = wk.QueueDelayedWork(dw, c.delay)
			got.flush = wk.FlushWork(&dw.Work)
			got.cancel = wk.CancelWorkSync(&dw.Work)
			got.cancelDelayed = wk.CancelDelayedWorkSync(dw)
			wk.FlushWorker()
			got.destroy = wk.Destroy()
		})
		deadlocks += 5
		wk.QueueDelayedWork(dw, 0)
		<-started
		res := make(chan bool)
		go func() {
			if c.delayed {
				res <- wk.CancelDelayedWorkSync(dw)
			} else {
				res <- wk.CancelWorkSync(&dw.Work)
			}
		}()
		waitFor(t, c.name+": the canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 1 })
		close(release)
		var was bool
		within(t, c.name+": the canceller", func() { was = <-res })
		if was != c.armedBefore {
			t.Errorf("%s: cancel = %v, want %v (pending when it began)", c.name, was, c.armedBefore)
		}
		got.check(t, c.name)
		if dw.Pending() {
			t.Errorf("%s: pending after the cancel returned", c.name)
		}
		within(t, c.name+": FlushWorker", wk.FlushWorker)
		if n := runs.Load(); n != 1 {
			t.Errorf("%s: ran %d times, want 1 (cancelled)", c.name, n)
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != deadlocks {
		t.Errorf("ErrDeadlock reported %d times, want %d: %v", got, deadlocks, errs.all())
	}
}

// TestOutsideCallsWhileCancelling: the same calls from other goroutines
// while a canceller holds a running item: ModDelayedWork returns true and
// queues nothing, QueueWork and QueueDelayedWork return false, FlushWork
// waits for the running instance, a second canceller waits too and returns
// false; nothing runs after the cancel returned.
func TestOutsideCallsWhileCancelling(t *testing.T) {
	wk := newWorker(t, "kt-outcancel")
	for _, d := range []time.Duration{0, time.Microsecond, time.Hour} {
		var runs atomic.Int32
		started, release := make(chan struct{}), make(chan struct{})
		dw := kthread.NewDelayedWork(func() {
			if runs.Add(1) == 1 {
				close(started)
				<-release
			}
		})
		wk.QueueDelayedWork(dw, 0)
		<-started
		first, second := make(chan bool), make(chan bool)
		go func() { first <- wk.CancelDelayedWorkSync(dw) }()
		waitFor(t, "the canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 1 })
		if !wk.ModDelayedWork(dw, d) {
			t.Errorf("d=%v: ModDelayedWork during cancel = false, want true", d)
		}
		if wk.QueueWork(&dw.Work) || wk.QueueDelayedWork(dw, d) {
			t.Errorf("d=%v: queueing during cancel = true, want false", d)
		}
		if dw.Pending() {
			t.Errorf("d=%v: pending after calls during cancel", d)
		}
		go func() { second <- wk.CancelWorkSync(&dw.Work) }()
		waitFor(t, "the second canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 2 })
		flushed := make(chan bool)
		go func() { flushed <- wk.FlushWork(&dw.Work) }()
		// Two cancel barriers and the flush barrier wait behind the item.
		waitFor(t, "the flush to wait", func() bool { return kthread.Queued(wk) == 3 })
		close(release)
		var a, b, f bool
		within(t, "the cancellers and the flush", func() { a, b, f = <-first, <-second, <-flushed })
		if a || b || !f {
			t.Errorf("d=%v: cancels = %v, %v, flush = %v; want false, false, true", d, a, b, f)
		}
		if dw.Pending() {
			t.Errorf("d=%v: pending after the cancels returned", d)
		}
		wk.FlushWorker()
		if n := runs.Load(); n != 1 {
			t.Errorf("d=%v: ran %d times, want 1", d, n)
		}
	}
}

// TestModRacingCancel: ModDelayedWork from outside and from the item
// itself (which re-arms itself) races CancelDelayedWorkSync from another
// goroutine, many times, with delays of zero to a millisecond. Every call
// returns; once the modifiers have stopped, a last cancel leaves the item
// idle, and it never runs again.
func TestModRacingCancel(t *testing.T) {
	wk := newWorker(t, "kt-modrace")
	var dw *kthread.DelayedWork
	var runs atomic.Int64
	var stop atomic.Bool
	dw = kthread.NewDelayedWork(func() {
		runs.Add(1)
		if !stop.Load() {
			wk.ModDelayedWork(dw, time.Duration(runs.Load()%3)*500*time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	const rounds = 300
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range rounds {
			wk.ModDelayedWork(dw, time.Duration(i%4)*300*time.Microsecond)
		}
	}()
	go func() {
		defer wg.Done()
		for range rounds {
			wk.CancelDelayedWorkSync(dw)
		}
	}()
	within(t, "the racing calls", wg.Wait)
	stop.Store(true)
	within(t, "the last cancel", func() { wk.CancelDelayedWorkSync(dw) })
	if dw.Pending() {
		t.Fatal("pending after the last CancelDelayedWorkSync")
	}
	n := runs.Load()
	// A timer armed before the cancel would fire within ms; flushing twice
	// lets anything already queued run, and the item must stay idle.
	wk.FlushWorker()
	wk.FlushWorker()
	if dw.Pending() || runs.Load() != n {
		t.Errorf("ran %d times after the last cancel returned (pending %v)", runs.Load()-n, dw.Pending())
	}
}

// TestQueueVariantsWhileRunning: calls from inside an item on itself with
// no canceller are the kernel's too: a running item may be queued again
// (it runs again after), ModDelayedWork of a running, idle item queues it
// and returns false, and the waits return ErrDeadlock.
func TestQueueVariantsWhileRunning(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-selfqueue")
	for i, call := range []func(*kthread.DelayedWork) bool{
		func(dw *kthread.DelayedWork) bool { return wk.QueueWork(&dw.Work) },
		func(dw *kthread.DelayedWork) bool { return wk.QueueDelayedWork(dw, 0) },
		func(dw *kthread.DelayedWork) bool { return wk.QueueDelayedWork(dw, time.Microsecond) },
		func(dw *kthread.DelayedWork) bool { return !wk.ModDelayedWork(dw, 0) },
		func(dw *kthread.DelayedWork) bool { return !wk.ModDelayedWork(dw, time.Microsecond) },
	} {
		var dw *kthread.DelayedWork
		var runs atomic.Int32
		var queued, flushed atomic.Bool
		dw = kthread.NewDelayedWork(func() {
			if runs.Add(1) > 1 {
				return
			}
			queued.Store(call(dw))
			flushed.Store(wk.FlushWork(&dw.Work))
		})
		wk.QueueDelayedWork(dw, 0)
		waitFor(t, fmt.Sprintf("call %d: the second run", i), func() bool { return runs.Load() == 2 })
		within(t, "FlushWork", func() { wk.FlushWork(&dw.Work) })
		if !queued.Load() || flushed.Load() {
			t.Errorf("call %d: queued %v, FlushWork(self) %v; want true, false", i, queued.Load(), flushed.Load())
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != 5 {
		t.Errorf("ErrDeadlock reported %d times, want 5: %v", got, errs.all())
	}
}

// TestHugeDelayDoesNotFireAtOnce catches a delayed item of a worker with
// an RT timer (WithFIFOLow, WithFIFO) running at once when armed with a
// delay near the int64 limit: now plus the delay wrapped into the past.
// The normal worker (Go timers) is checked too. RT variants skip where
// SCHED_FIFO is refused.
func TestHugeDelayDoesNotFireAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
	}{
		{"normal", nil},
		{"fifo-low", []kthread.Option{kthread.WithFIFOLow()}},
		{"fifo", []kthread.Option{kthread.WithFIFO()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-huge-delay", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer wk.Destroy()
			for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1<<63 - 1<<40} {
				var runs atomic.Int32
				dw := kthread.NewDelayedWork(func() { runs.Add(1) })
				if !wk.QueueDelayedWork(dw, d) {
					t.Fatalf("QueueDelayedWork(%d) = false", int64(d))
				}
				time.Sleep(20 * time.Millisecond)
				wk.FlushWorker()
				if n := runs.Load(); n != 0 {
					t.Errorf("delay %d: ran %d times at once", int64(d), n)
				}
				if !wk.ModDelayedWork(dw, d) {
					t.Errorf("delay %d: ModDelayedWork = false: the item was no longer pending", int64(d))
				}
				time.Sleep(5 * time.Millisecond)
				wk.FlushWorker()
				if n := runs.Load(); n != 0 {
					t.Errorf("ModDelayedWork %d: ran %d times at once", int64(d), n)
				}
				if !wk.CancelDelayedWorkSync(dw) {
					t.Errorf("delay %d: CancelDelayedWorkSync = false", int64(d))
				}
			}
		})
	}
}

// threadAttrs are the attributes that must not leak with a thread.
type threadAttrs struct {
	name string
	cpus []int
	attr sched.Attr
}

func (a threadAttrs) String() string { return fmt.Sprintf("%q cpus %v %+v", a.name, a.cpus, a.attr) }

func (a threadAttrs) equal(b threadAttrs) bool {
	return a.name == b.name && slices.Equal(a.cpus, b.cpus) && a.attr == b.attr
}

// readAttrs reads thread tid's attributes; false when it is gone.
func readAttrs(tid int) (threadAttrs, bool) {
	var a threadAttrs
	var err error
	if a.name, err = sched.ThreadName(tid); err != nil {
		return a, false
	}
	if a.cpus, err = sched.Affinity(tid); err != nil {
		return a, false
	}
	if a.attr, err = sched.GetAttr(tid); err != nil {
		return a, false
	}
	return a, true
}

// processAttrs are the main thread's attributes, which an escaped thread
// must get back.
func processAttrs(t *testing.T) threadAttrs {
	t.Helper()
	a, ok := readAttrs(os.Getpid())
	if !ok {
		t.Fatal("cannot read the main thread's attributes")
	}
	return a
}

// workerAttrs are the attributes a worker made by escapeWorker has.
func workerAttrs(wk *kthread.Worker, nice int) threadAttrs {
	name := wk.Name()
	if len(name) > 15 {
		name = name[:15]
	}
	return threadAttrs{name: name, cpus: []int{wk.CPU()}, attr: sched.Attr{Policy: sched.PolicyNormal, Nice: nice}}
}

// escapeWorker is a worker with a name, a CPU and a class of its own, so
// that a thread that escaped with them would show.
func escapeWorker(t *testing.T, name string, nice int) *kthread.Worker {
	t.Helper()
	cpus := wq.OnlineCPUs()
	wk, err := kthread.CreateWorkerOnCPU(cpus[len(cpus)-1], name, kthread.WithNice(nice))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wk.Destroy(); err != nil {
			t.Errorf("Destroy(%s): %v", name, err)
		}
	})
	return wk
}

// checkServes queues an item and checks that it runs on the worker's
// current thread, which has the worker's attributes.
func checkServes(t *testing.T, wk *kthread.Worker, want threadAttrs) {
	t.Helper()
	var c counter
	w := kthread.NewWork(c.fn)
	if !wk.QueueWork(w) {
		t.Fatalf("%s: QueueWork = false", wk.Name())
	}
	wk.FlushWork(w)
	tid := int(c.tid.Load())
	if c.n.Load() != 1 || tid != wk.TID() {
		t.Fatalf("%s: item ran %d times on thread %d, worker's thread is %d", wk.Name(), c.n.Load(), tid, wk.TID())
	}
	if got, ok := readAttrs(tid); !ok || !got.equal(want) {
		t.Errorf("%s: thread %d has %v, want %v", wk.Name(), tid, got, want)
	}
}

func unlock(n int) {
	for range n {
		runtime.UnlockOSThread()
	}
}

// TestStrayUnlockKeepsThread: a work function that calls
// runtime.UnlockOSThread fewer times than the worker's goroutine is
// locked (sched.LockDepth) only lowers the nesting count: the worker
// keeps its thread, its attributes, and reports nothing.
func TestStrayUnlockKeepsThread(t *testing.T) {
	errs := captureErrors(t)
	nice := testNice(t)
	for _, n := range []int{1, 2, 10, sched.LockDepth - 1} {
		wk := escapeWorker(t, fmt.Sprintf("kt-unlock%d", n), nice)
		tid := wk.TID()
		for range 3 { // again, on the same worker: the count keeps falling
			w := kthread.NewWork(func() { unlock(n) })
			wk.QueueWork(w)
			wk.FlushWork(w)
			checkServes(t, wk, workerAttrs(wk, nice))
			if n == sched.LockDepth-1 {
				break // one more call would make it escape
			}
		}
		if got := wk.TID(); got != tid {
			t.Errorf("unlock x%d: TID %d -> %d, want unchanged", n, tid, got)
		}
	}
	if got := errs.count(kthread.ErrThreadEscaped); got != 0 {
		t.Errorf("ErrThreadEscaped reported %d times: %v", got, errs.all())
	}
}

// leaveThread, called from a work function whose goroutine is no longer
// locked to its thread old, makes it leave old for good: it starts a
// goroutine, which the runtime runs next on this thread when the caller
// blocks, that locks old and holds it until release is closed. It returns
// false when it did not manage in 10 s.
func leaveThread(old int) (release chan struct{}, ok bool) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rel := make(chan struct{})
		got := make(chan int)
		go func() {
			runtime.LockOSThread()
			got <- sched.Gettid()
			<-rel
			runtime.UnlockOSThread()
		}()
		if <-got == old && sched.Gettid() != old {
			return rel, true
		}
		close(rel)
	}
	return nil, false
}

// TestUnlockEscapeRetiresThread: a work function that unlocks the
// worker's goroutine from its thread (sched.LockDepth calls or more, in
// one item or across several) and then leaves the thread (it blocked, and
// the Go scheduler ran it elsewhere and gave the thread to another
// goroutine) does not leave the worker's named, pinned, niced thread to
// the other goroutines: the worker reports ErrThreadEscaped (and
// ErrGoexit or the panic when the item ended so), the thread gets the
// process's name, affinity and class back, and the worker keeps serving
// on a new thread with its own attributes.
func TestUnlockEscapeRetiresThread(t *testing.T) {
	errs := captureErrors(t)
	var panics atomic.Int32
	kthread.SetPanicHandler(func(kthread.PanicInfo) { panics.Add(1) })
	t.Cleanup(func() { kthread.SetPanicHandler(nil) })
	nice := testNice(t)
	proc := processAttrs(t)
	// The process's name, CPUs and class; without the privilege to lower
	// a nice the escaped thread keeps the worker's (reported).
	repaired := proc
	if !mayLowerNice(proc.attr.Nice) {
		repaired.attr = sched.Attr{Policy: sched.PolicyNormal, Nice: nice}
	}
	var goexits, escapes int
	for _, c := range []struct {
		name   string
		before []int // unlock counts of the items run before
		unlock int   // unlock count of the item that leaves
		end    func()
		also   error
	}{
		{"depth", nil, sched.LockDepth, func() {}, nil},
		{"beyond", nil, 3 * sched.LockDepth, func() {}, nil},
		{"across-items", []int{sched.LockDepth - 1, 1}, 0, func() {}, nil},
		{"many-items", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0, func() {}, nil},
		{"then-goexit", nil, sched.LockDepth, runtime.Goexit, kthread.ErrGoexit},
		{"then-panic", nil, sched.LockDepth, func() { panic("escaped and panicked") }, nil},
	} {
		wk := escapeWorker(t, "kt-esc-"+c.name, nice)
		old := wk.TID()
		for _, n := range c.before {
			w := kthread.NewWork(func() { unlock(n) })
			wk.QueueWork(w)
			wk.FlushWork(w)
		}
		if len(c.before) > 0 {
			// Drained but still on its thread: nothing has leaked yet.
			if got := wk.TID(); got != old {
				t.Errorf("%s: TID %d -> %d before the item left its thread", c.name, old, got)
			}
			checkServes(t, wk, workerAttrs(wk, nice))
		}
		var release chan struct{}
		var moved bool
		w := kthread.NewWork(func() {
			unlock(c.unlock)
			if release, moved = leaveThread(old); moved {
				c.end()
			}
		})
		wk.QueueWork(w)
		wk.FlushWork(w)
		if !moved {
			t.Fatalf("%s: could not make the work function leave its thread in 10 s", c.name)
		}
		escapes++
		if c.also == kthread.ErrGoexit {
			goexits++
		}
		waitFor(t, c.name+": the report", func() bool { return errs.count(kthread.ErrThreadEscaped) == escapes })
		// The old thread is alive (our goroutine holds it) and repaired.
		if a, alive := readAttrs(old); !alive || !a.equal(repaired) {
			t.Errorf("%s: escaped thread %d has %v (alive %v), want %v", c.name, old, a, alive, repaired)
		}
		// The replacement thread, while our goroutine still holds the old
		// one. FlushWork may have returned before the replacement started
		// (it returns false at once when the test goroutine was delayed
		// until the escaped item had finished), and once the old thread is
		// released the runtime may start the replacement on it (it is an
		// ordinary, repaired runtime thread by then): TID would stay old.
		waitFor(t, c.name+": a new thread", func() bool { tid := wk.TID(); return tid != 0 && tid != old })
		close(release)
		checkServes(t, wk, workerAttrs(wk, nice))
	}
	if got := errs.count(kthread.ErrThreadEscaped); got != escapes {
		t.Errorf("ErrThreadEscaped reported %d times, want %d: %v", got, escapes, errs.all())
	}
	if got := errs.count(kthread.ErrGoexit); got != goexits {
		t.Errorf("ErrGoexit reported %d times, want %d: %v", got, goexits, errs.all())
	}
	if n := panics.Load(); n != 1 {
		t.Errorf("panic handler called %d times, want 1", n)
	}
	if repaired.attr != proc.attr {
		for _, e := range errs.all() {
			if errors.Is(e, kthread.ErrThreadEscaped) && !strings.Contains(e.Error(), "keeps some of the worker's attributes") {
				t.Errorf("report does not say that the thread kept the worker's nice: %v", e)
			}
		}
	}
}

// TestDrainedThreadNeverLeaks: a work function drains the lock count but
// stays on the worker's thread; the thread then ends with its goroutine,
// never serving anybody else: after runtime.Goexit in the same item, or
// when the worker is destroyed.
func TestDrainedThreadNeverLeaks(t *testing.T) {
	errs := captureErrors(t)
	nice := testNice(t)
	proc := processAttrs(t)
	for _, goexit := range []bool{false, true} {
		wk := escapeWorker(t, fmt.Sprintf("kt-drained-%v", goexit), nice)
		old := wk.TID()
		w := kthread.NewWork(func() {
			unlock(2 * sched.LockDepth)
			if goexit {
				runtime.Goexit()
			}
		})
		wk.QueueWork(w)
		wk.FlushWork(w)
		checkServes(t, wk, workerAttrs(wk, nice))
		if goexit {
			if wk.TID() == old {
				t.Errorf("TID unchanged after runtime.Goexit")
			}
		} else if err := wk.Destroy(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the old thread to exit or get the process's attributes back", func() bool {
			a, alive := readAttrs(old)
			return !alive || a.equal(proc)
		})
	}
	if got := errs.count(kthread.ErrGoexit); got != 1 {
		t.Errorf("ErrGoexit reported %d times, want 1: %v", got, errs.all())
	}
}

const permChildEnv = "KTHREAD_TEST_PERM_CHILD"

// checkRefused runs the privilege checks that must fail with
// ErrPermission in a process without CAP_SYS_NICE and RLIMIT_RTPRIO, and
// returns the failures.
func checkRefused() []string {
	var fails []string
	expectPerm := func(what string, err error) {
		if !errors.Is(err, kthread.ErrPermission) {
			fails = append(fails, fmt.Sprintf("%s = %v, want ErrPermission", what, err))
		} else if !strings.Contains(err.Error(), "CAP_SYS_NICE") {
			fails = append(fails, fmt.Sprintf("%s: error %q does not say how to grant the privilege", what, err))
		}
	}
	for _, c := range []struct {
		name string
		opt  kthread.Option
	}{{"WithFIFO", kthread.WithFIFO()}, {"WithFIFOLow", kthread.WithFIFOLow()}, {"WithNice(-5)", kthread.WithNice(-5)}} {
		wk, err := kthread.CreateWorker("kt-perm", c.opt)
		expectPerm("CreateWorker("+c.name+")", err)
		if wk != nil {
			_ = wk.Destroy()
		}
	}
	// The kernel's own refusal, on a running worker.
	wk, err := kthread.CreateWorker("kt-perm-plain")
	if err != nil {
		return append(fails, "CreateWorker(plain): "+err.Error())
	}
	before, err := sched.GetAttr(wk.TID())
	if err != nil {
		return append(fails, "GetAttr: "+err.Error())
	}
	beforeClass, beforeErr := wk.Class()
	expectPerm("SetFIFO", kthread.SetFIFO(wk))
	expectPerm("SetFIFOLow", kthread.SetFIFOLow(wk))
	expectPerm("SetNormal(-5)", kthread.SetNormal(wk, -5))
	if a, err := sched.GetAttr(wk.TID()); err != nil || a != before {
		fails = append(fails, fmt.Sprintf("after refused changes the worker is %+v (%v), want unchanged %+v", a, err, before))
	}
	if c, err := wk.Class(); c != beforeClass || (err == nil) != (beforeErr == nil) {
		fails = append(fails, fmt.Sprintf("after refused changes Class() = %v, %v; want unchanged %v, %v", c, err, beforeClass, beforeErr))
	}
	// The class recorded for replacement threads did not change either.
	x := kthread.NewWork(runtime.Goexit)
	wk.QueueWork(x)
	wk.FlushWork(x)
	for wk.TID() == 0 {
		runtime.Gosched()
	}
	if a, err := sched.GetAttr(wk.TID()); err != nil || a != before {
		fails = append(fails, fmt.Sprintf("replacement thread after refused changes is %+v (%v), want %+v", a, err, before))
	}
	_ = wk.Destroy()
	// PerCPU: the default HIGHPRI fallback and the FIFO-low workers.
	s, err := kthread.NewPerCPU("kt-perm", wqfallback.Queue(nil))
	expectPerm("NewPerCPU(wqfallback.Queue(nil))", err)
	if s != nil {
		_ = s.Destroy()
	}
	fb, err := wq.Alloc("kt-perm-fb", wq.Unbound, 0)
	if err != nil {
		return append(fails, "wq.Alloc: "+err.Error())
	}
	s, err = kthread.NewPerCPU("kt-perm", wqfallback.Queue(fb), kthread.WithFIFOLow())
	expectPerm("NewPerCPU(WithFIFOLow)", err)
	if s != nil {
		_ = s.Destroy()
	}
	fb.Destroy()
	return fails
}

// TestPermissionRefused checks that a class the process may not use fails
// with ErrPermission instead of degrading: directly when the test itself
// runs unprivileged, else in a child re-executed as user nobody (65534),
// which drops CAP_SYS_NICE.
func TestPermissionRefused(t *testing.T) {
	if sched.CheckRT(1) != nil && sched.CheckNice(-5) != nil {
		for _, f := range checkRefused() {
			t.Error(f)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("privileged but not root: cannot drop CAP_SYS_NICE by switching to nobody")
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^$"}, permChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	var exitErr *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exitErr):
		t.Skipf("cannot start the test binary as nobody: %v", err)
	case strings.Contains(text, "SKIP:"):
		t.Skip(strings.TrimSpace(text))
	case err != nil:
		t.Fatalf("unprivileged child: %v\n%s", err, text)
	case !strings.Contains(text, "OK"):
		t.Fatalf("unprivileged child gave no verdict:\n%s", text)
	}
}

// TestDelayedRTTimer: a worker created with an RT class (WithFIFOLow,
// WithFIFO) times its delayed items on the RT timer thread, a normal
// worker on Go timers; either way an item runs once per arming, Mod and
// Cancel keep their return values, and Destroy cancels an armed item.
// The RT variants skip where SCHED_FIFO is refused (as nobody).
func TestDelayedRTTimer(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
		rt   bool
	}{
		{"normal", nil, false},
		{"fifo-low", []kthread.Option{kthread.WithFIFOLow()}, true},
		{"fifo", []kthread.Option{kthread.WithFIFO()}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-rttimer", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			dw := kthread.NewDelayedWork(func() { runs.Add(1) })
			if !wk.QueueDelayedWork(dw, time.Hour) {
				t.Fatal("QueueDelayedWork of an idle item = false")
			}
			if got := kthread.ArmedOnRT(dw); got != c.rt {
				t.Fatalf("armed on the RT timer thread = %v, want %v", got, c.rt)
			}
			if wk.QueueDelayedWork(dw, time.Millisecond) {
				t.Fatal("QueueDelayedWork of an armed item = true")
			}
			if !wk.ModDelayedWork(dw, time.Millisecond) {
				t.Fatal("ModDelayedWork of an armed item = false")
			}
			for end := time.Now().Add(10 * time.Second); runs.Load() == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("the 1 ms item never ran")
				}
			}
			wk.FlushWorker()
			if !wk.QueueDelayedWork(dw, time.Hour) {
				t.Fatal("QueueDelayedWork after the run = false")
			}
			if !wk.CancelDelayedWorkSync(dw) {
				t.Fatal("CancelDelayedWorkSync of an armed item = false")
			}
			if wk.CancelDelayedWorkSync(dw) {
				t.Fatal("second CancelDelayedWorkSync = true")
			}
			wk.QueueDelayedWork(dw, time.Hour)
			if err := wk.Destroy(); !errors.Is(err, kthread.ErrDelayedPending) {
				t.Fatalf("Destroy with an armed item: %v, want ErrDelayedPending", err)
			}
			if dw.Pending() {
				t.Fatal("item pending after Destroy")
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("%d runs, want 1", n)
			}
		})
	}
}

var benchEpoch = time.Now()

func nowNs() int64 { return int64(time.Since(benchEpoch)) }

func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i])
}

// BenchmarkQueueToStart measures the latency from queueing an item to the
// moment its function starts (DESIGN-NOTES' "scheduling latency"), one item
// at a time so that the worker is idle (parked) at each queue, and reports
// p50/p99 in ns for a kthread Worker (futex wake), for a SCHED_FIFO-low
// kthread Worker when permitted, and for a goroutine reading a channel, the
// usual Go baseline, in the same run. Compare the ratios, not the absolute
// numbers: the machines are noisy.
func BenchmarkQueueToStart(b *testing.B) {
	wk, err := kthread.CreateWorker("kt-bench")
	if err != nil {
		b.Fatal(err)
	}
	defer wk.Destroy()
	var rt *kthread.Worker
	if sched.CheckRT(kthread.FIFOLowPriority) == nil {
		if rt, err = kthread.CreateWorker("kt-bench-rt", kthread.WithFIFOLow()); err != nil {
			b.Fatal(err)
		}
		defer rt.Destroy()
	}

	var t0 atomic.Int64
	var lat int64
	done := make(chan struct{}, 1)
	start := func() {
		lat = nowNs() - t0.Load()
		done <- struct{}{}
	}
	// One item per worker: an item that has signalled is still running on
	// its worker for a moment, and may not be queued on another meanwhile.
	w, wRT := kthread.NewWork(start), kthread.NewWork(start)

	ch := make(chan func(), 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for f := range ch {
			f()
		}
	}()
	defer func() { close(ch); <-exited }()

	kt := make([]int64, 0, b.N)
	ktRT := make([]int64, 0, b.N)
	chn := make([]int64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0.Store(nowNs())
		if !wk.QueueWork(w) {
			b.Fatal("QueueWork = false")
		}
		<-done
		kt = append(kt, lat)

		if rt != nil {
			t0.Store(nowNs())
			if !rt.QueueWork(wRT) {
				b.Fatal("QueueWork(RT) = false")
			}
			<-done
			ktRT = append(ktRT, lat)
		}

		t0.Store(nowNs())
		ch <- start
		<-done
		chn = append(chn, lat)
	}
	b.StopTimer()
	for _, s := range [][]int64{kt, ktRT, chn} {
		slices.Sort(s)
	}
	b.ReportMetric(percentile(kt, 0.50), "kthread-p50-ns")
	b.ReportMetric(percentile(kt, 0.99), "kthread-p99-ns")
	if rt != nil {
		b.ReportMetric(percentile(ktRT, 0.50), "fifolow-p50-ns")
		b.ReportMetric(percentile(ktRT, 0.99), "fifolow-p99-ns")
	}
	b.ReportMetric(percentile(chn, 0.50), "chan-p50-ns")
	b.ReportMetric(percentile(chn, 0.99), "chan-p99-ns")
}

// BenchmarkQueueWork measures the cost of QueueWork itself on a busy
// worker (the item is already pending most of the time, as in a hot
// producer), and checks that it does not allocate.
func BenchmarkQueueWork(b *testing.B) {
	wk, err := kthread.CreateWorker("kt-benchq")
	if err != nil {
		b.Fatal(err)
	}
	defer wk.Destroy()
	w := kthread.NewWork(func() {})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wk.QueueWork(w)
	}
	b.StopTimer()
	wk.FlushWorker()
}

// TestDestroyLeavesNothingPending: Destroy with delayed items armed (one
// hour, a few ms, several at once, one re-armed from the running item
// during the drain, one queued behind the running item) runs what was
// queued, cancels what was armed and names it in ErrDelayedPending; after
// it returns no item of the worker is pending, FlushWork and the cancels
// of each return at once, and each can be queued on another worker, where
// it runs exactly once.
func TestDestroyLeavesNothingPending(t *testing.T) {
	errs := captureErrors(t)
	for _, c := range []struct {
		name   string
		delays []time.Duration // armed before Destroy; 0 = queued
		rearm  time.Duration   // the running item re-arms itself with this during the drain, -1 = not
	}{
		{"one-hour", []time.Duration{time.Hour}, -1},
		{"several", []time.Duration{time.Hour, time.Hour, 2 * time.Hour, time.Minute}, -1},
		{"mixed", []time.Duration{0, time.Hour, 0, time.Minute, 0}, -1},
		{"short", []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Hour}, -1},
		{"rearm-during-drain", []time.Duration{time.Hour}, time.Hour},
		{"rearm-now-during-drain", nil, 0},
	} {
		wk, err := kthread.CreateWorker("kt-dd-" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		runs := make([]atomic.Int32, len(c.delays)+1)
		dws := make([]*kthread.DelayedWork, len(c.delays)+1)
		for i := range c.delays {
			dws[i] = kthread.NewDelayedWork(func() { runs[i].Add(1) })
		}
		// The last item holds the worker while Destroy begins, and
		// re-arms itself (refused: the worker is dying) if asked to.
		last := len(c.delays)
		started, release := make(chan struct{}), make(chan struct{})
		var rearmed atomic.Bool
		dws[last] = kthread.NewDelayedWork(func() {
			if runs[last].Add(1) == 1 {
				close(started)
				<-release
				if c.rearm >= 0 {
					rearmed.Store(wk.QueueDelayedWork(dws[last], c.rearm))
				}
			}
		})
		wk.QueueDelayedWork(dws[last], 0)
		<-started
		armed := 0
		for i, d := range c.delays {
			if !wk.QueueDelayedWork(dws[i], d) {
				t.Fatalf("%s: QueueDelayedWork(%d, %v) = false", c.name, i, d)
			}
			if d > 0 {
				armed++
			}
		}
		res := make(chan error)
		go func() { res <- wk.Destroy() }()
		waitFor(t, c.name+": Destroy to begin", func() bool { return kthread.Dying(wk) })
		close(release)
		var derr error
		within(t, c.name+": Destroy", func() { derr = <-res })
		if rearmed.Load() {
			t.Errorf("%s: re-arming during the drain = true, want false (dying)", c.name)
		}
		// Timers of a few ms may have fired before Destroy took the
		// worker: those items were queued and ran; the rest were cancelled.
		ranArmed := 0
		for i, d := range c.delays {
			switch n := runs[i].Load(); {
			case d == 0 && n != 1:
				t.Errorf("%s: queued item %d ran %d times, want 1", c.name, i, n)
			case d > 0 && n > 1:
				t.Errorf("%s: armed item %d ran %d times", c.name, i, n)
			case d > 0 && n == 1:
				ranArmed++
			}
		}
		cancelled := armed - ranArmed
		switch {
		case cancelled == 0 && derr != nil:
			t.Errorf("%s: Destroy = %v, want nil (nothing was armed)", c.name, derr)
		case cancelled > 0 && !errors.Is(derr, kthread.ErrDelayedPending):
			t.Errorf("%s: Destroy = %v, want ErrDelayedPending", c.name, derr)
		case cancelled > 0 && !strings.Contains(derr.Error(), "TestDestroyLeavesNothingPending"):
			t.Errorf("%s: %q does not name the cancelled functions", c.name, derr)
		}
		wk2 := newWorker(t, "kt-dd2-"+c.name)
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("%s: item %d pending after Destroy returned", c.name, i)
			}
			var flushed, cancel1, cancel2 bool
			within(t, c.name+": FlushWork and the cancels", func() {
				flushed = wk.FlushWork(&dw.Work)
				cancel1 = wk.CancelDelayedWorkSync(dw)
				cancel2 = wk.CancelWorkSync(&dw.Work)
			})
			if flushed || cancel1 || cancel2 {
				t.Errorf("%s: item %d: FlushWork %v, cancels %v %v after Destroy; want false", c.name, i, flushed, cancel1, cancel2)
			}
			before := runs[i].Load()
			if i%2 == 0 {
				if !wk2.QueueWork(&dw.Work) {
					t.Errorf("%s: QueueWork of item %d on another worker = false", c.name, i)
				}
			} else if !wk2.QueueDelayedWork(dw, time.Millisecond) {
				t.Errorf("%s: QueueDelayedWork of item %d on another worker = false", c.name, i)
			}
			within(t, c.name+": FlushWork on the other worker", func() { wk2.FlushWork(&dw.Work) })
			if got := runs[i].Load() - before; got != 1 {
				t.Errorf("%s: item %d ran %d times on the other worker, want 1", c.name, i, got)
			}
		}
		wk2.FlushWorker()
	}
	if n := errs.count(kthread.ErrOtherWorker); n != 0 {
		t.Errorf("ErrOtherWorker reported %d times: %v", n, errs.all())
	}
}

// TestDestroyRacingDelayedQueue: QueueDelayedWork and ModDelayedWork from
// several goroutines race Destroy. Whatever each call returned, after
// Destroy returns no item is pending, none runs again, and each runs
// exactly once when queued on another worker.
func TestDestroyRacingDelayedQueue(t *testing.T) {
	captureErrors(t)
	for round := range 20 {
		wk, err := kthread.CreateWorker("kt-ddrace")
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var runs [n]atomic.Int32
		var dws [n]*kthread.DelayedWork
		for i := range dws {
			dws[i] = kthread.NewDelayedWork(func() { runs[i].Add(1) })
		}
		var wg sync.WaitGroup
		for i := range dws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					d := []time.Duration{0, time.Microsecond, time.Millisecond, time.Hour}[(i+j)%4]
					if j%2 == 0 {
						wk.QueueDelayedWork(dws[i], d)
					} else {
						wk.ModDelayedWork(dws[i], d)
					}
				}
			}()
		}
		var derr error
		within(t, "Destroy", func() { derr = wk.Destroy() })
		if derr != nil && !errors.Is(derr, kthread.ErrDelayedPending) {
			t.Fatalf("round %d: Destroy = %v", round, derr)
		}
		within(t, "the queueing goroutines", wg.Wait)
		wk2, err := kthread.CreateWorker("kt-ddrace2")
		if err != nil {
			t.Fatal(err)
		}
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("round %d: item %d pending after Destroy", round, i)
			}
			before := runs[i].Load()
			if !wk2.QueueDelayedWork(dw, 0) {
				t.Errorf("round %d: item %d cannot be queued on another worker", round, i)
			}
			within(t, "FlushWork", func() { wk2.FlushWork(&dw.Work) })
			if got := runs[i].Load() - before; got != 1 {
				t.Errorf("round %d: item %d ran %d times on the other worker, want 1", round, i, got)
			}
		}
		if err := wk2.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplacementThreadWaitsForTheGate: a work function that ends its
// worker's thread (runtime.Goexit) while the thread gate refuses leaves
// the worker without a thread until the gate allows again: the refusal is
// reported (ErrThreadLimit), items queued meanwhile wait and then run
// once each, and Destroy returns. Catches a replacement started past the
// gate (the runtime aborts the process) or given up (items never run).
func TestReplacementThreadWaitsForTheGate(t *testing.T) {
	errs := captureErrors(t)
	var refuse atomic.Bool
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/test", Max: 10, Current: 10}
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		if refuse.Load() {
			return 0, lim, nil
		}
		return 1 << 20, sched.ThreadLimit{}, nil
	})
	defer restore()
	wk, err := kthread.CreateWorker("kt-lc-respawn")
	if err != nil {
		t.Fatal(err)
	}
	wk.QueueWork(kthread.NewWork(func() {
		refuse.Store(true)
		runtime.Goexit()
	}))
	var c counter
	w := kthread.NewWork(c.fn)
	wk.QueueWork(w)
	waitFor(t, "the refusal report", func() bool { return errs.count(kthread.ErrThreadLimit) == 1 })
	time.Sleep(30 * time.Millisecond)
	if n := c.n.Load(); n != 0 {
		t.Fatalf("an item ran %d times with no thread", n)
	}
	refuse.Store(false)
	within(t, "FlushWork", func() { wk.FlushWork(w) })
	if n := c.n.Load(); n != 1 {
		t.Errorf("the item queued while the gate refused ran %d times, want 1", n)
	}
	within(t, "Destroy", func() {
		if err := wk.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
}

func TestGoexitReplacesThread(t *testing.T) {
	errs := captureErrors(t)
	cpu := wq.OnlineCPUs()[0]
	nice := testNice(t)
	wk, err := kthread.CreateWorkerOnCPU(cpu, "kt-goexit", kthread.WithNice(nice))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wk.Destroy() })
	oldTID := wk.TID()
	x := kthread.NewWork(runtime.Goexit)
	var c counter
	y := kthread.NewWork(c.fn)
	wk.QueueWork(x)
	wk.QueueWork(y)
	// A flush of the Goexit item is released normally.
	wk.FlushWork(x)
	wk.FlushWork(y)
	if c.n.Load() != 1 {
		t.Fatal("worker stalled after runtime.Goexit")
	}
	newTID := wk.TID()
	if newTID == oldTID || int(c.tid.Load()) != newTID {
		t.Errorf("TID before %d, after %d, item ran on %d; want a new thread", oldTID, newTID, c.tid.Load())
	}
	if got := errs.count(kthread.ErrGoexit); got != 1 {
		t.Errorf("ErrGoexit reported %d times, want 1", got)
	}
	// The replacement has the same name, affinity and class.
	if name, _ := sched.ThreadName(newTID); name != fmt.Sprintf("kt-goexit/%d", cpu) {
		t.Errorf("replacement thread name %q", name)
	}
	if aff, err := sched.Affinity(newTID); err != nil || !slices.Equal(aff, []int{cpu}) {
		t.Errorf("replacement affinity %v (%v), want [%d]", aff, err, cpu)
	}
	if a, err := sched.GetAttr(newTID); err != nil || a.Policy != sched.PolicyNormal || a.Nice != nice {
		t.Errorf("replacement attr %+v (%v), want nice %d", a, err, nice)
	}
	waitFor(t, "the old thread to exit", func() bool { return !sched.ProcessAlive(oldTID) })
	if err := wk.Destroy(); err != nil {
		t.Fatal(err)
	}
}
