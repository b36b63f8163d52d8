package wq_test

import (
	"context"
	"errors"
	"math"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// TestDelayedFlushDuringDrainRunsItem: an item armed before Drain began is
// accepted by the draining queue when its timer fires (queuePendedFrom
// with fromTimer), but DelayedWork.Flush of the same armed instance
// during the drain queues it with fromTimer=false: the queue refuses it
// with ErrDraining and the item is cancelled, so Flush returns having
// "waited" for a function that never ran.
func TestDelayedFlushDuringDrainRunsItem(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	q, err := wq.Alloc("rev-delayed-drain", wq.Unbound, 0, wq.WithErrorHandler(func(op, fn string, err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	g := newKeyGate() // keeps the drain going
	if !q.Queue(g.w) {
		t.Fatal("Queue(gate) = false")
	}
	waitChan(t, "gate", g.started)
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	if !q.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed = false")
	}
	drained := make(chan struct{})
	go func() { q.Drain(); close(drained) }()
	// Wait until the drain is under way: an outside Queue is refused.
	probe := wq.NewWork(func() {})
	deadline := time.Now().Add(60 * time.Second)
	for q.Queue(probe) {
		probe.Flush()
		if time.Now().After(deadline) {
			t.Fatal("Drain never began")
		}
		time.Sleep(time.Millisecond)
	}
	flushed := make(chan struct{})
	go func() { dw.Flush(); close(flushed) }()
	// The flushed instance must run once the gate opens (as a timer that
	// fired during the drain would).
	close(g.open)
	waitChan(t, "dw.Flush", flushed)
	waitChan(t, "Drain", drained)
	if n := ran.Load(); n != 1 {
		mu.Lock()
		defer mu.Unlock()
		draining := 0
		for _, e := range errs {
			if errors.Is(e, wq.ErrDraining) {
				draining++
			}
		}
		t.Errorf("the armed item ran %d times after DelayedWork.Flush during Drain, want 1 (%d ErrDraining report(s))", n, draining)
	}
}

// TestModDelayedRacingExpiryRunsOnceOrTwice: ModDelayed with delays of a few us
// races the timer's expiry (Go timers and, where permitted, the RT timer
// thread); after each round's Flush the item ran once or twice (twice
// when the first arming fired and ran before the second ModDelayed), never
// zero times (lost) nor three (fired twice), and Cancel leaves it idle.
func TestModDelayedRacingExpiryRunsOnceOrTwice(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"unbound", wq.Unbound}, {"percpu-rt", wq.PerCPU | wq.RT}, {"unbound-rt", wq.Unbound | wq.RT}} {
		t.Run(c.name, func(t *testing.T) {
			q, err := wq.Alloc("rev-mod-"+c.name, c.flags, 0)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			var runs atomic.Int32
			dw := wq.NewDelayedWork(func() { runs.Add(1) })
			for i := range 2000 {
				r0 := runs.Load()
				d1 := time.Duration(i%7) * time.Microsecond
				d2 := time.Duration(i%5) * 3 * time.Microsecond
				q.ModDelayed(dw, d1)
				for range i % 3 {
					runtime.Gosched()
				}
				q.ModDelayed(dw, d2)
				dw.Flush()
				if n := runs.Load() - r0; n < 1 || n > 2 {
					t.Fatalf("round %d: the item ran %d times (want 1 or 2)", i, n)
				}
				if i%4 == 0 {
					q.ModDelayed(dw, d1)
					dw.CancelSync()
					r1 := runs.Load()
					if dw.Pending() {
						t.Fatalf("round %d: pending after CancelSync", i)
					}
					dw.Flush()
					if runs.Load() != r1 {
						t.Fatalf("round %d: ran after CancelSync", i)
					}
				}
			}
		})
	}
}

// The example, from outside: ModDelayed racing CancelSync must not
// re-arm the item after CancelSync returned.
func TestModDelayedRacingCancelSync(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, time.Hour} {
		q := mustAlloc(t, "modrace", wq.Unbound, 0)
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var runs atomic.Int32
		dw := wq.NewDelayedWork(func() {
			runs.Add(1)
			started <- struct{}{}
			<-release
		})
		q.QueueDelayed(dw, 0)
		<-started
		done := make(chan struct{})
		go func() { dw.CancelSync(); close(done) }()
		waitFor(t, "hold", func() bool { return wq.Held(&dw.Work) })
		var modRet bool
		mustReturn(t, "ModDelayed during CancelSync", func() { modRet = q.ModDelayed(dw, d) })
		if !modRet {
			t.Errorf("d=%v: ModDelayed during CancelSync = false, want true (the canceller wins)", d)
		}
		close(release)
		mustReturn(t, "CancelSync", func() { <-done })
		if dw.Pending() {
			t.Errorf("d=%v: re-armed after CancelSync returned", d)
		}
		time.Sleep(5 * time.Millisecond)
		if n := runs.Load(); n != 1 {
			t.Errorf("d=%v: item ran %d times", d, n)
		}
		mustReturn(t, "Destroy", q.Destroy)
	}
}

// Destroy while delayed items are armed: they end idle and reported, and
// another queue can take them.
func TestDestroyWithArmedDelayed(t *testing.T) {
	for _, c := range []struct {
		flags wq.Flags
		delay time.Duration
		n     int
	}{{wq.PerCPU, 300 * time.Millisecond, 1}, {wq.Unbound, time.Hour, 3}, {wq.PerCPU | wq.MemReclaim, time.Hour, 2}} {
		errs := captureErrors(t)
		q, err := wq.Alloc("armed", c.flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Int32
		var dws []*wq.DelayedWork
		for range c.n {
			dw := wq.NewDelayedWork(func() { ran.Add(1) })
			if !q.QueueDelayed(dw, c.delay) {
				t.Fatal("QueueDelayed refused")
			}
			dws = append(dws, dw)
		}
		mustReturn(t, "Destroy", q.Destroy)
		if got := errs.count(wq.ErrDelayedPending); got != 1 {
			t.Errorf("ErrDelayedPending reported %d times, want 1", got)
		}
		q2 := mustAlloc(t, "armed2", wq.Unbound, 0)
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("item %d pending after Destroy", i)
			}
			mustReturn(t, "Flush", func() {
				if dw.Flush() {
					t.Errorf("item %d: Flush after Destroy waited", i)
				}
			})
			if q.QueueDelayed(dw, 0) {
				t.Errorf("QueueDelayed on the destroyed queue accepted")
			}
			if !q2.QueueDelayed(dw, time.Millisecond) {
				t.Errorf("item %d: another queue could not take it", i)
			}
		}
		waitFor(t, "items on the second queue", func() bool { return int(ran.Load()) == c.n })
		if q.ModDelayed(dws[0], time.Millisecond) {
			t.Error("ModDelayed on a destroyed queue returned true")
		}
		wq.SetErrorHandler(nil)
	}
}

func TestDrainKeepsFiredDelayedItems(t *testing.T) {
	q := mustAlloc(t, "drainfire", wq.Unbound, 0)
	var ran atomic.Int32
	var blocker sync.WaitGroup
	blocker.Add(1)
	q.Queue(wq.NewWork(func() { blocker.Wait() }))
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	q.QueueDelayed(dw, 2*time.Millisecond)
	go func() { time.Sleep(20 * time.Millisecond); blocker.Done() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.DrainContext(ctx); err != nil {
		t.Fatal(err)
	}
	if ran.Load() == 0 {
		// The 2 ms timer fired after the 20 ms blocker (a busy machine):
		// the item is queued after Drain, and must still run.
		t.Log("the timer fired after Drain returned")
	}
	waitFor(t, "the delayed item's run", func() bool { return ran.Load() >= 1 })
	if n := ran.Load(); n != 1 {
		t.Errorf("a delayed item that fired during Drain ran %d times, want 1", n)
	}
}

// Flush of a delayed item from its own function, with its timer re-armed:
// the item is queued and ErrDeadlock reported, no hang.
func TestDelayedSelfFlushArmed(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "selfflush", wq.Unbound, 0)
	var runs atomic.Int32
	var dw *wq.DelayedWork
	got := make(chan bool, 1)
	dw = wq.NewDelayedWork(func() {
		if runs.Add(1) == 1 {
			q.QueueDelayed(dw, time.Hour)
			got <- dw.Flush()
		}
	})
	q.QueueDelayed(dw, 0)
	var r bool
	mustReturn(t, "self Flush", func() { r = <-got })
	if r {
		t.Error("self Flush returned true")
	}
	waitFor(t, "second run", func() bool { return runs.Load() == 2 })
	if errs.count(wq.ErrDeadlock) != 1 {
		t.Errorf("ErrDeadlock reported %d times, want 1", errs.count(wq.ErrDeadlock))
	}
}

// timerThreads returns how many RT timer threads ("ktimers/...") the
// process has.
func timerThreads(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err == nil && strings.HasPrefix(string(b), "ktimers/") {
			n++
		}
	}
	return n
}

// TestDelayedRTTimer: on an RT queue (per-CPU and unbound) a delayed item
// is armed on the RT timer thread, runs once when it expires, arms and
// cancels without allocating, and Destroy ends the timer thread the
// queue started. Skipped where RT queues are refused (as nobody).
func TestDelayedRTTimer(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"percpu", wq.PerCPU | wq.RT}, {"unbound", wq.Unbound | wq.RT}} {
		t.Run(c.name, func(t *testing.T) {
			before := timerThreads(t)
			q, err := wq.Alloc("rt-delayed-"+c.name, c.flags, 1)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("RT queues refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			var runs atomic.Int32
			dw := wq.NewDelayedWork(func() { runs.Add(1) })
			if !q.QueueDelayed(dw, time.Hour) {
				t.Fatal("QueueDelayed of an idle item = false")
			}
			if !dw.ArmedOnRT() {
				t.Fatal("the item is not armed on the RT timer thread")
			}
			// The thread starts without the arming waiting for it. (Where
			// another queue of the package holds RT timers, the thread
			// may be shared and outlive q: not checked then.)
			for end := time.Now().Add(10 * time.Second); before == 0 && timerThreads(t) == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("no ktimers thread while an item is armed")
				}
			}
			if !q.ModDelayed(dw, time.Millisecond) {
				t.Fatal("ModDelayed of an armed item = false")
			}
			for end := time.Now().Add(10 * time.Second); runs.Load() == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("the 1 ms item never ran")
				}
			}
			dw.Flush()
			if n := testing.AllocsPerRun(200, func() {
				if !q.QueueDelayed(dw, time.Hour) || !dw.Cancel() {
					t.Fatal("QueueDelayed/Cancel of an idle item failed")
				}
			}); n != 0 {
				t.Errorf("QueueDelayed+Cancel on the RT timer: %.1f allocs/op, want 0", n)
			}
			q.Destroy()
			if n := runs.Load(); n != 1 {
				t.Fatalf("%d runs, want 1", n)
			}
			// Destroy waits for the thread's goroutine; the runtime then
			// ends the locked thread itself.
			for end := time.Now().Add(10 * time.Second); before == 0 && timerThreads(t) != 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatalf("%d ktimers threads after Destroy, none before the queue", timerThreads(t))
				}
			}
		})
	}
}

// TestDestroyReportsFiringTimers: an item whose timer fired during Destroy
// is run or reported in ErrDelayedPending, never left pending.
// Fault caught (delayed.go closeTimers/stopTimerOn vs timerFn): when Stop fails
// because the timer has fired but timerFn has not yet taken dw.mu and
// q.timerMu, closeTimers neither cancels the item nor counts it in
// q.firing, so it may return first. The late timerFn then sees
// timersClosed and cancels the item after Destroy collected the names:
// the item is pending after Destroy returned and it is never reported
// (neither run nor in ErrDelayedPending).
func TestDestroyReportsFiringTimers(t *testing.T) {
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

func TestDelayed(t *testing.T) {
	q := mustAlloc(t, "delayed", wq.Unbound, 0)
	var runs atomic.Int32
	dw := wq.NewDelayedWork(func() { runs.Add(1) })
	if !q.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed returned false")
	}
	if q.QueueDelayed(dw, time.Hour) {
		t.Error("QueueDelayed of a pending item returned true")
	}
	if !q.ModDelayed(dw, time.Hour) {
		t.Error("ModDelayed of a pending item returned false")
	}
	// flush_delayed_work queues a pending timer at once and waits.
	if !dw.Flush() {
		t.Error("Flush of an armed delayed item returned false")
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d after Flush, want 1", runs.Load())
	}
	if q.ModDelayed(dw, time.Millisecond) {
		t.Error("ModDelayed of an idle item returned true")
	}
	waitFor(t, "delayed run", func() bool { return runs.Load() == 2 })
	q.QueueDelayed(dw, time.Hour)
	if !dw.Cancel() {
		t.Error("Cancel of an armed delayed item returned false")
	}
	if dw.Pending() {
		t.Error("pending after Cancel")
	}
	q.QueueDelayed(dw, time.Hour)
	if !dw.CancelSync() {
		t.Error("CancelSync of an armed delayed item returned false")
	}
	if runs.Load() != 2 {
		t.Errorf("runs = %d, want 2", runs.Load())
	}
}

// TestHugeDelayOnRTQueueDoesNotFire catches a delayed item armed on an RT
// timer thread with a delay near the int64 limit running at once, because
// now plus the delay wrapped into the past. Go-timer queues are checked
// too. RT variants skip where SCHED_FIFO is refused.
func TestHugeDelayOnRTQueueDoesNotFire(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"percpu-rt", wq.PerCPU | wq.RT}, {"unbound-rt", wq.Unbound | wq.RT}, {"percpu", wq.PerCPU}, {"unbound", wq.Unbound}} {
		t.Run(c.name, func(t *testing.T) {
			q, err := wq.Alloc("huge-delay-"+c.name, c.flags, 1)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("RT queues refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			for _, d := range hugeDelays {
				var runs atomic.Int32
				dw := wq.NewDelayedWork(func() { runs.Add(1) })
				if !q.QueueDelayed(dw, d) {
					t.Fatalf("QueueDelayed(%d) of an idle item = false", int64(d))
				}
				time.Sleep(20 * time.Millisecond)
				q.Flush()
				if n := runs.Load(); n != 0 {
					t.Errorf("delay %d: ran %d times at once", int64(d), n)
				}
				if !dw.Cancel() {
					t.Errorf("delay %d: Cancel = false: the item was no longer armed", int64(d))
				}
				// ModDelayed goes through the same arming.
				dw2 := wq.NewDelayedWork(func() { runs.Add(1) })
				q.ModDelayed(dw2, d)
				time.Sleep(5 * time.Millisecond)
				q.Flush()
				if n := runs.Load(); n != 0 {
					t.Errorf("ModDelayed %d: ran %d times at once", int64(d), n)
				}
				dw2.Cancel()
			}
		})
	}
}

// hugeDelays are delays whose deadline, now plus the delay, does not fit
// in an int64 of nanoseconds.
var hugeDelays = []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1<<63 - 1<<40}

// TestModDelayedRefusalHandlerMayDestroy: the error handler of a queue
// may Destroy it when ModDelayed is refused (here: an item taken off
// another queue onto a full q, ErrQueueFull). The instance ModDelayed
// carries counts as firing on q, which Destroy's closeTimers waits for:
// the refusal must be reported after the instance stopped counting, or
// the handler waits for its own caller.
func TestModDelayedRefusalHandlerMayDestroy(t *testing.T) {
	var q *wq.Workqueue
	b := newBlocker()
	defer b.free()
	var destroys atomic.Int32
	handler := func(op, fn string, err error) {
		if errors.Is(err, wq.ErrQueueFull) && destroys.Add(1) == 1 {
			b.free()
			q.Destroy()
		}
	}
	// Destroyed at the end only if nothing hung: a second Destroy waits
	// for the hung one.
	q = allocUnlessHung(t, "mod-refused-destroy", wq.WithMaxPending(1), wq.WithErrorHandler(handler))
	other := allocUnlessHung(t, "mod-refused-other")
	if !q.Queue(b.w) {
		t.Fatal("Queue(blocker) = false")
	}
	b.waitStarted(t)
	if !q.Queue(wq.NewWork(func() {})) {
		t.Fatal("Queue below MaxPending = false")
	}
	dw := wq.NewDelayedWork(func() {})
	if !other.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed on the other queue = false")
	}
	mustReturn(t, "ModDelayed whose refusal's handler destroys the queue", func() {
		if !q.ModDelayed(dw, 0) {
			t.Error("ModDelayed of an instance pending elsewhere = false, want true")
		}
	})
	if destroys.Load() != 1 {
		t.Fatalf("ErrQueueFull reported %d times, want 1", destroys.Load())
	}
	if dw.Pending() {
		t.Error("the refused instance is still pending")
	}
}

// allocUnlessHung allocates an unbound queue with max_active 1, destroyed
// at cleanup unless the test failed: a test that finds a Destroy hung
// must not hang in its cleanup too.
func allocUnlessHung(t *testing.T, name string, opts ...wq.Option) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, wq.Unbound, 1, opts...)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", name, err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			q.Destroy()
		}
	})
	return q
}

// TestModDelayedRefusedElsewhereLeavesPendingInstance: an item that
// requeues itself on queue p from its function is pending on p, or
// running there and pending again. ModDelayed to q either moves the
// pending instance (returns true: it was pending) or, while the item runs
// on p, is refused with ErrOtherQueue and returns false, leaving the
// pending instance on p. ModDelayed checks the other queue before its
// grab; an instance that started in between must not make the grab take
// the one queued again and cancel it (true returned, ErrOtherQueue
// reported, the instance gone).
func TestModDelayedRefusedElsewhereLeavesPendingInstance(t *testing.T) {
	var refused atomic.Int64
	q := allocUnlessHung(t, "mod-elsewhere-q", wq.WithErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrOtherQueue) {
			refused.Add(1)
		}
	}))
	p := allocUnlessHung(t, "mod-elsewhere-p")
	var dw *wq.DelayedWork
	dw = wq.NewDelayedWork(func() { p.Queue(&dw.Work) })
	stop := func() {
		dw.Disable()
		dw.CancelSync()
		dw.Enable()
	}
	defer stop()
	deadline := time.Now().Add(2 * time.Second)
	moved, checked := 0, 0
	for time.Now().Before(deadline) {
		if !p.Queue(&dw.Work) {
			t.Fatal("Queue on p of the idle item = false")
		}
		for i := 0; i < 1000; i++ {
			before := refused.Load()
			was := q.ModDelayed(dw, time.Hour)
			if refused.Load() == before {
				moved++ // armed on q: start again on p
				break
			}
			checked++
			if was {
				t.Fatalf("ModDelayed refused with ErrOtherQueue returned true: it took the instance pending on p and cancelled it (after %d refusals)", checked)
			}
		}
		stop()
	}
	t.Logf("%d refusals, %d moves", checked, moved)
	if checked == 0 {
		t.Skip("ModDelayed was never refused (the item was never seen running on p)")
	}
}

// TestDestroyFromTracerQueueWorkOfDelayedItem: the tracer's queue_work
// runs under no gowq lock (SetTracer forbids queueing, cancelling and
// flushing only from activate_work). An item ModDelayed queues at once
// (d = 0), or whose timer fired, is counted as firing on q while it is
// queued, and so while the tracer runs: a Destroy there would wait in
// closeTimers for a count its own goroutine holds. Destroy of q from the
// queue_work of an item bound for q returns ErrDeadlock, as from q's own
// items, and the item still runs.
func TestDestroyFromTracerQueueWorkOfDelayedItem(t *testing.T) {
	for _, mode := range []string{"Queue", "ModDelayed", "timer"} {
		t.Run(mode, func(t *testing.T) {
			name := "tr-destroy-" + mode
			q := allocUnlessHung(t, name)
			var once atomic.Bool
			destroyed := make(chan error, 1)
			wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
				if ev.Kind == wqtrace.QueueWork && ev.Workqueue == name && once.CompareAndSwap(false, true) {
					destroyed <- q.DestroyContext(context.Background())
				}
			}))
			defer wq.SetTracer(nil)
			var ran atomic.Int32
			dw := wq.NewDelayedWork(func() { ran.Add(1) })
			go func() {
				switch mode {
				case "Queue":
					q.Queue(&dw.Work)
				case "ModDelayed":
					q.ModDelayed(dw, 0)
				case "timer":
					q.QueueDelayed(dw, time.Millisecond)
				}
			}()
			var err error
			mustReturn(t, "Destroy from the tracer's queue_work of the "+mode+" item", func() { err = <-destroyed })
			if !errors.Is(err, wq.ErrDeadlock) {
				t.Errorf("DestroyContext from the tracer's queue_work = %v, want ErrDeadlock", err)
			}
			waitFor(t, "the "+mode+" item's run", func() bool { return ran.Load() == 1 })
		})
	}
}
