package wq_test

// Regression tests from the concurrency review of the hardening change:
// each failed (or hung, caught by mustReturn/waitFor) before its fix.

import (
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

func reviewTimerTarget()    {}
func reviewActivateTarget() {}
func reviewSelfCancelFn()   {}

// Fixed (delayed.go timerFn): timerFn increments q.firing and then calls
// queuePendedFrom, which emits queue_work to the tracer with no defer
// around the firing count. A tracer that calls runtime.Goexit on the
// timer's goroutine leaves q.firing > 0 forever, and Destroy
// (closeTimers) waits on timerIdle forever.
func TestReviewGoexitInTimerQueueWorkHangsDestroy(t *testing.T) {
	captureErrors(t)
	q, err := wq.Alloc("rvtimer", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr := &goexitTracer{kind: wqtrace.QueueWork, fn: "reviewTimerTarget", mode: "goexit"}
	wq.SetTracer(tr)
	defer wq.SetTracer(nil)
	dw := wq.NewDelayedWork(reviewTimerTarget)
	if !q.QueueDelayed(dw, time.Millisecond) {
		t.Fatal("QueueDelayed refused")
	}
	waitFor(t, "tracer fired on the timer goroutine", func() bool { return tr.fired.Load() > 0 })
	waitFor(t, "item released", func() bool { return !dw.Pending() })
	wq.SetTracer(nil)
	mustReturn(t, "Destroy after a Goexit in the timer's queue_work", q.Destroy)
}

// Fixed (work.go grab -> pwq.unlink -> afterSlotFreed -> activate): a grab
// that unlinks an active item frees a max_active slot and activates an
// inactive item under the pool lock; activate_work is traced there. A
// tracer Goexit runs activate's onGoexit (kick + unlock) but nobody
// releases the item the grabber now owns: it stays PENDING forever, and
// every later CancelSync/Cancel/Queue of it spins or refuses.
func TestReviewGoexitInActivateDuringCancelLeavesPending(t *testing.T) {
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
	c := wq.NewWork(reviewActivateTarget)
	q.Queue(c) // inactive: both slots are used
	tr := &goexitTracer{kind: wqtrace.ActivateWork, fn: "reviewActivateTarget", mode: "goexit"}
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

// Fixed (delayed.go closeTimers/stopTimerOn vs timerFn): when Stop fails
// because the timer has fired but timerFn has not yet taken dw.mu and
// q.timerMu, closeTimers neither cancels the item nor counts it in
// q.firing, so it may return first. The late timerFn then sees
// timersClosed and cancels the item after Destroy collected the names:
// the item is pending after Destroy returned and it is never reported
// (neither run nor in ErrDelayedPending).
func TestReviewDestroyMissesFiringTimers(t *testing.T) {
	re := regexp.MustCompile(`(\d+) armed item\(s\) cancelled`)
	for attempt := 0; attempt < 30; attempt++ {
		var mu sync.Mutex
		reported := 0
		wq.SetErrorHandler(func(op, fn string, err error) {
			if m := re.FindStringSubmatch(err.Error()); m != nil {
				n, _ := strconv.Atoi(m[1])
				mu.Lock()
				reported += n
				mu.Unlock()
			}
		})
		q, err := wq.Alloc("rvfire", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		const n = 2000
		var ran atomic.Int32
		dws := make([]*wq.DelayedWork, n)
		d := 2 * time.Millisecond
		for i := range dws {
			dws[i] = wq.NewDelayedWork(func() { ran.Add(1) })
			q.QueueDelayed(dws[i], d)
		}
		time.Sleep(d + time.Duration(attempt%5)*200*time.Microsecond)
		mustReturn(t, "Destroy", q.Destroy)
		pendingAfter := 0
		for _, dw := range dws {
			if dw.Pending() {
				pendingAfter++
			}
		}
		waitFor(t, "items idle", func() bool {
			for _, dw := range dws {
				if dw.Pending() {
					return false
				}
			}
			return true
		})
		time.Sleep(10 * time.Millisecond) // let late reports land
		mu.Lock()
		got := reported + int(ran.Load())
		mu.Unlock()
		wq.SetErrorHandler(nil)
		if pendingAfter > 0 || got != n {
			t.Fatalf("attempt %d: %d item(s) pending after Destroy returned; ran %d + reported %d = %d, want %d",
				attempt, pendingAfter, ran.Load(), got-int(ran.Load()), got, n)
		}
	}
}

// Fixed (work.go grab): the item is "in transit" while its queuer emits
// queue_work to the tracer (before linking it), but grab only recognises
// self-waits on a worker between dequeue and start (grabSelf). A tracer
// that cancels the item it is told about on queue_work (same thread, same
// item) spins forever in grab, waiting for itself.
func TestReviewTracerCancelOnQueueWorkSpinsForever(t *testing.T) {
	captureErrors(t)
	q := mustAlloc(t, "rvself", wq.Unbound, 0)
	w := wq.NewWork(reviewSelfCancelFn)
	var done atomic.Bool
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.QueueWork && ev.Function != "" && regexp.MustCompile("reviewSelfCancelFn").MatchString(ev.Function) && !done.Load() {
			w.Cancel()
			done.Store(true)
		}
	}))
	defer wq.SetTracer(nil)
	go q.Queue(w)
	waitFor(t, "Cancel from the queue_work tracer returned", done.Load)
}

type tracerFunc func(ev *wqtrace.Event)

func (f tracerFunc) Trace(ev *wqtrace.Event) { f(ev) }

func reviewStatsTarget() {}

// Fixed (stats.go Stats, new p.mu.Lock per pool): Stats now takes every
// pool lock, but activate_work is traced with the pool lock held
// (pwq.activate), so a tracer that reads q.Stats() on activate_work
// deadlocks on the non-reentrant pool lock (before this change Stats was
// lock-free on the pool side and "safe from any goroutine").
func TestReviewStatsFromActivateTracerDeadlocks(t *testing.T) {
	captureErrors(t)
	q, err := wq.Alloc("rvstats", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Bool
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.ActivateWork && regexp.MustCompile("reviewStatsTarget").MatchString(ev.Function) {
			_ = q.Stats()
			done.Store(true)
		}
	}))
	defer wq.SetTracer(nil)
	go q.Queue(wq.NewWork(reviewStatsTarget))
	waitFor(t, "Stats from the activate_work tracer returned", done.Load)
	wq.SetTracer(nil)
	mustReturn(t, "Destroy", q.Destroy)
}
