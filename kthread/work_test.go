package kthread_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
)

// counter is a work function that counts its runs and the thread it ran on.
type counter struct {
	n   atomic.Int32
	tid atomic.Int64
}

func (c *counter) fn() {
	c.tid.Store(int64(sched.Gettid()))
	c.n.Add(1)
}

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
