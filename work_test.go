package wq_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// Calls on an item from inside its own running instance while another
// goroutine waits to cancel it.
func TestSelfCallsDuringCancelSync(t *testing.T) {
	type selfCall struct {
		name string
		call func(q *wq.Workqueue, dw *wq.DelayedWork) bool
		want bool
	}
	calls := []selfCall{
		{"ModDelayed 1ms", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.ModDelayed(dw, time.Millisecond) }, true},
		{"ModDelayed 0", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.ModDelayed(dw, 0) }, true},
		{"QueueDelayed", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.QueueDelayed(dw, time.Millisecond) }, false},
		{"Queue", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.Queue(&dw.Work) }, false},
		{"Cancel", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.Cancel() }, false},
		{"CancelSync", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.CancelSync() }, false},
		{"DisableSync", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.DisableSync() }, false},
		{"Flush", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.Flush() }, false},
	}
	for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		for _, sync := range []string{"CancelSync", "DisableSync"} {
			for _, c := range calls {
				t.Run(flags.String()+"/"+sync+"/"+c.name, func(t *testing.T) {
					errs := captureErrors(t)
					q := mustAlloc(t, "selfcall", flags, 0)
					started := make(chan struct{})
					proceed := make(chan struct{})
					var got atomic.Int32
					var runs atomic.Int32
					var dw *wq.DelayedWork
					dw = wq.NewDelayedWork(func() {
						if runs.Add(1) > 1 {
							return
						}
						close(started)
						<-proceed
						if c.call(q, dw) {
							got.Store(1)
						} else {
							got.Store(2)
						}
					})
					if !q.QueueDelayed(dw, 0) {
						t.Fatal("QueueDelayed refused")
					}
					<-started
					cancelled := make(chan bool)
					go func() {
						if sync == "CancelSync" {
							cancelled <- dw.CancelSync()
						} else {
							cancelled <- dw.DisableSync()
						}
					}()
					// Let the canceller take hold of the item first.
					waitFor(t, "canceller to hold the item", func() bool { return wq.Held(&dw.Work) })
					close(proceed)
					var was bool
					mustReturn(t, sync, func() { was = <-cancelled })
					if was {
						t.Errorf("%s = true for an item that was only running", sync)
					}
					if g := got.Load(); g == 0 || (g == 1) != c.want {
						t.Errorf("self %s returned %v, want %v", c.name, g == 1, c.want)
					}
					if dw.Pending() {
						t.Errorf("item pending after %s returned", sync)
					}
					time.Sleep(5 * time.Millisecond) // a re-armed 1 ms timer would have fired
					if n := runs.Load(); n != 1 {
						t.Errorf("item ran %d times; the canceller must win", n)
					}
					if c.name == "CancelSync" || c.name == "DisableSync" || c.name == "Flush" {
						if errs.count(wq.ErrDeadlock) == 0 {
							t.Errorf("self %s did not report ErrDeadlock", c.name)
						}
					}
					if sync == "DisableSync" || c.name == "DisableSync" {
						for dw.Disabled() {
							dw.Enable()
						}
					}
					mustReturn(t, "Destroy", q.Destroy)
				})
			}
		}
	}
}

func TestCancel(t *testing.T) {
	q := mustAlloc(t, "cancel", wq.PerCPU, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	blocker := wq.NewWork(func() { started <- struct{}{}; <-release })
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	q.QueueOn(0, blocker)
	<-started
	q.QueueOn(0, w) // inactive behind max_active 1
	if !w.Cancel() {
		t.Error("Cancel of a pending item returned false")
	}
	if w.Cancel() {
		t.Error("Cancel of an idle item returned true")
	}
	if w.Pending() {
		t.Error("still pending after Cancel")
	}
	// CancelSync waits for the running instance.
	done := make(chan bool)
	go func() { done <- blocker.CancelSync() }()
	select {
	case <-done:
		t.Fatal("CancelSync returned while the item was running")
	case <-time.After(20 * time.Millisecond):
	}
	if q.Queue(blocker) {
		t.Error("Queue during CancelSync returned true")
	}
	close(release)
	if <-done {
		t.Error("CancelSync of a running, not pending item returned true")
	}
	q.Flush()
	if ran.Load() {
		t.Error("cancelled item ran")
	}
}

func TestDisableEnable(t *testing.T) {
	q := mustAlloc(t, "disable", wq.PerCPU, 0)
	var runs atomic.Int32
	w := wq.NewWork(func() { runs.Add(1) })
	if w.Disable() {
		t.Error("Disable of an idle item returned true")
	}
	w.Disable()
	if q.Queue(w) {
		t.Error("Queue of a disabled item returned true")
	}
	if w.Enable() {
		t.Error("Enable returned true with count 2 -> 1")
	}
	if !w.Enable() {
		t.Error("Enable returned false with count 1 -> 0")
	}
	if !q.Queue(w) {
		t.Error("Queue after Enable returned false")
	}
	w.Flush()
	if runs.Load() != 1 {
		t.Errorf("runs = %d, want 1", runs.Load())
	}
}

// Work.FlushContext of an item from the tracer's event of the instance it
// would wait for, on the goroutine that must go on for that instance to
// run (queue_work: the queuer, before the item is linked; execute_start:
// the worker, before it starts the item), returns ErrDeadlock at once, as
// CancelSync there does. It waited until its deadline (forever for
// Flush).
func TestWorkFlushFromOwnTracerEventIsDeadlock(t *testing.T) {
	for _, kind := range []wqtrace.Kind{wqtrace.QueueWork, wqtrace.ExecuteStart} {
		for _, opts := range [][]wq.Option{nil, {wq.Threads()}} {
			t.Run(kind.String()+"/threads="+strconv.FormatBool(opts != nil), func(t *testing.T) {
				errs := captureErrors(t)
				q := mustAlloc(t, "flush-tracer-self", wq.Unbound, 0, opts...)
				var w *wq.Work
				w = wq.NewWork(func() {})
				got := make(chan error, 1)
				var once atomic.Bool
				wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
					if ev.Kind == kind && ev.Workqueue == q.Name() && once.CompareAndSwap(false, true) {
						// Generous: a wait that ends only at the deadline is the bug.
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						defer cancel()
						_, err := w.FlushContext(ctx)
						got <- err
					}
				}))
				t.Cleanup(func() { wq.SetTracer(nil) })
				q.Queue(w)
				var err error
				mustReturn(t, "the tracer's FlushContext", func() { err = <-got })
				wq.SetTracer(nil)
				if !errors.Is(err, wq.ErrDeadlock) {
					t.Errorf("FlushContext from the tracer's %v of its own instance = %v, want ErrDeadlock", kind, err)
				}
				mustReturn(t, "Flush after", func() { w.Flush() })
				_ = errs
			})
		}
	}
}

func TestCancelSyncContext(t *testing.T) {
	// Catches a CancelSyncContext that does not wait, waits past its ctx,
	// or does not cancel the pending instance when ctx ends.
	q := mustAlloc(t, "sd-csc", wq.Unbound, 2)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	q.Queue(b.w) // pending again behind its running instance
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	was, err := b.w.CancelSyncContext(ctx)
	if !was || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CancelSyncContext = %v, %v; want true, DeadlineExceeded", was, err)
	}
	if b.w.Pending() {
		t.Fatal("pending instance not cancelled when ctx ended")
	}
	if !q.Queue(b.w) {
		t.Fatal("item still held after CancelSyncContext returned")
	}
	done := make(chan [2]any, 1)
	go func() {
		was, err := b.w.CancelSyncContext(context.Background())
		done <- [2]any{was, err}
	}()
	select {
	case <-done:
		t.Fatal("CancelSyncContext returned while the item runs")
	case <-time.After(20 * time.Millisecond):
	}
	b.free()
	r := <-done
	if r[0] != true || r[1] != nil {
		t.Fatalf("CancelSyncContext = %v, %v; want true, nil", r[0], r[1])
	}
	if b.w.Busy() != 0 {
		t.Fatal("item busy after CancelSyncContext returned nil")
	}
	if was, err := b.w.CancelSyncContext(context.Background()); was || err != nil {
		t.Fatalf("CancelSyncContext of an idle item = %v, %v", was, err)
	}
	// From inside the item: ErrDeadlock, no wait.
	errs := captureErrors(t)
	got := make(chan error, 1)
	var self *wq.Work
	self = wq.NewWork(func() { _, err := self.CancelSyncContext(context.Background()); got <- err })
	q.Queue(self)
	if err := <-got; !errors.Is(err, wq.ErrDeadlock) {
		t.Fatalf("CancelSyncContext from the item itself = %v", err)
	}
	q.Flush()
	if errs.count(wq.ErrDeadlock) != 1 {
		t.Error("ErrDeadlock not reported")
	}
}
