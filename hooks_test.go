package wq_test

import (
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

func tracerTimerTarget() {}

func tracerActivateTarget() {}

func tracerSelfCancelFn() {}

// TestDestroyReturnsWhenTracerGoexitsInTimer: Destroy returns after a
// tracer calls runtime.Goexit on queue_work on the timer's goroutine.
// Fault caught (delayed.go timerFn): timerFn increments q.firing and then calls
// queuePendedFrom, which emits queue_work to the tracer with no defer
// around the firing count. A tracer that calls runtime.Goexit on the
// timer's goroutine leaves q.firing > 0 forever, and Destroy
// (closeTimers) waits on timerIdle forever.
func TestDestroyReturnsWhenTracerGoexitsInTimer(t *testing.T) {
	captureErrors(t)
	q, err := wq.Alloc("rvtimer", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := &goexitTracer{kind: wqtrace.QueueWork, fn: "tracerTimerTarget", mode: "goexit"}
	wq.SetTracer(tr)
	defer wq.SetTracer(nil)
	dw := wq.NewDelayedWork(tracerTimerTarget)
	if !q.QueueDelayed(dw, time.Millisecond) {
		t.Fatal("QueueDelayed refused")
	}
	waitFor(t, "tracer fired on the timer goroutine", func() bool { return tr.fired.Load() > 0 })
	waitFor(t, "item released", func() bool { return !dw.Pending() })
	wq.SetTracer(nil)
	mustReturn(t, "Destroy after a Goexit in the timer's queue_work", q.Destroy)
}

// TestCancelReleasesItemWhenTracerGoexitsInActivate: a tracer Goexit on
// activate_work during a cancel does not leave the item PENDING.
// Fault caught (work.go grab -> pwq.unlink -> afterSlotFreed -> activate): a grab
// that unlinks an active item frees a max_active slot and activates an
// inactive item under the pool lock; activate_work is traced there. A
// tracer Goexit runs activate's onGoexit (kick + unlock) but nobody
// releases the item the grabber now owns: it stays PENDING forever, and
// every later CancelSync/Cancel/Queue of it spins or refuses.
func TestCancelReleasesItemWhenTracerGoexitsInActivate(t *testing.T) {
	captureErrors(t)
	q := mustAlloc(t, "rvact", wq.Unbound, 2)
	started := make(chan struct{}, 4)
	block := make(chan struct{})
	a := wq.NewWork(func() {
		started <- struct{}{}
		<-block
	})
	q.Queue(a)
	<-started
	if !q.Queue(a) { // requeued while running: pending, active (slot 2)
		t.Fatal("requeue refused")
	}
	c := wq.NewWork(tracerActivateTarget)
	q.Queue(c) // inactive: both slots are used
	tr := &goexitTracer{kind: wqtrace.ActivateWork, fn: "tracerActivateTarget", mode: "goexit"}
	wq.SetTracer(tr)
	defer wq.SetTracer(nil)
	go a.Cancel() // unlink a -> activate c -> tracer Goexit
	waitFor(t, "tracer fired", func() bool { return tr.fired.Load() > 0 })
	wq.SetTracer(nil)
	close(block)
	mustReturn(t, "Flush c", func() { c.Flush() })
	waitFor(t, "cancelled item not pending", func() bool { return !a.Pending() })
	mustReturn(t, "CancelSync of the cancelled item", func() { a.CancelSync() })
}

// TestTracerMayCancelItemOnQueueWork: a tracer may cancel the item it is
// told about on queue_work without spinning forever.
// Fault caught (work.go grab): the item is "in transit" while its queuer emits
// queue_work to the tracer (before linking it), but grab only recognises
// self-waits on a worker between dequeue and start (grabSelf). A tracer
// that cancels the item it is told about on queue_work (same thread, same
// item) spins forever in grab, waiting for itself.
func TestTracerMayCancelItemOnQueueWork(t *testing.T) {
	captureErrors(t)
	q := mustAlloc(t, "rvself", wq.Unbound, 0)
	w := wq.NewWork(tracerSelfCancelFn)
	var done atomic.Bool
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.QueueWork && ev.Function != "" && regexp.MustCompile("tracerSelfCancelFn").MatchString(ev.Function) && !done.Load() {
			w.Cancel()
			done.Store(true)
		}
	}))
	defer wq.SetTracer(nil)
	go q.Queue(w)
	waitFor(t, "Cancel from the queue_work tracer returned", done.Load)
}

func tracerStatsTarget() {}

// TestTracerMayReadStatsOnActivate: a tracer may call Stats on
// activate_work without deadlocking.
// Fault caught (stats.go Stats, which takes every pool lock): Stats now takes every
// pool lock, but activate_work is traced with the pool lock held
// (pwq.activate), so a tracer that reads q.Stats() on activate_work
// deadlocks on the non-reentrant pool lock (before this change Stats was
// lock-free on the pool side and "safe from any goroutine").
func TestTracerMayReadStatsOnActivate(t *testing.T) {
	captureErrors(t)
	q, err := wq.Alloc("rvstats", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.ActivateWork && regexp.MustCompile("tracerStatsTarget").MatchString(ev.Function) {
			_ = q.Stats()
			done.Store(true)
		}
	}))
	defer wq.SetTracer(nil)
	go q.Queue(wq.NewWork(tracerStatsTarget))
	waitFor(t, "Stats from the activate_work tracer returned", done.Load)
	wq.SetTracer(nil)
	mustReturn(t, "Destroy", q.Destroy)
}

// TestPanicHandlerMayWaitForItem: a panic handler runs on the
// worker after the work function, as part of the item. One that queues
// another item on the same per-CPU pool and waits for it must see it run:
// its worker sleeps in the handler, which the CM monitor must count as a
// blocked item (wake another worker), and the worker must not be a
// scanner there (incoming.go), or the item is pushed for a worker that is
// not coming. It failed when the handler ran with worker.inFn false and
// the worker counted in pool.scanners: the item was drained by the CM
// monitor onto the worklist behind the worker, counted as running, and
// nobody ran it until the handler gave up.
func TestPanicHandlerMayWaitForItem(t *testing.T) {
	ran := make(chan struct{})
	second := wq.NewWork(func() { close(ran) })
	waited := make(chan bool, 1)
	var q *wq.Workqueue
	q, err := wq.Alloc("handler-waits", wq.PerCPU, 0, wq.WithPanicHandler(func(wq.PanicInfo) {
		q.QueueOn(0, second)
		select {
		case <-ran:
			waited <- true
		case <-time.After(10 * time.Second):
			waited <- false
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	q.QueueOn(0, wq.NewWork(func() { panic("handler-waits") }))
	if !<-waited {
		t.Fatal("an item queued by a waiting panic handler on its own per-CPU pool never ran (10 s)")
	}
}
