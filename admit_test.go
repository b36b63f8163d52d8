package wq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// admEntry is one way into a queue for TestAdmissionTable. call queues
// fn through the entry and returns the call's error (nil for a bool call
// that returned true, errRefusedBool when it returned false); arms is
// set for entries that arm a timer.
type admEntry struct {
	name string
	arms bool
	call func(q *wq.Workqueue, fn func()) error
}

var errRefusedBool = errors.New("bool call returned false")

func boolErr(ok bool) error {
	if ok {
		return nil
	}
	return errRefusedBool
}

func admEntries() []admEntry {
	return []admEntry{
		{"Queue", false, func(q *wq.Workqueue, fn func()) error { return boolErr(q.Queue(wq.NewWork(fn))) }},
		{"QueueOn", false, func(q *wq.Workqueue, fn func()) error { return boolErr(q.QueueOn(0, wq.NewWork(fn))) }},
		{"QueueNode", false, func(q *wq.Workqueue, fn func()) error { return boolErr(q.QueueNode(0, wq.NewWork(fn))) }},
		{"Group.TryGo", false, func(q *wq.Workqueue, fn func()) error {
			g, _ := q.NewGroup(context.Background())
			return boolErr(g.TryGo(func(context.Context) error { fn(); return nil }))
		}},
		{"QueueErr", false, func(q *wq.Workqueue, fn func()) error { _, err := q.QueueErr(wq.NewWork(fn)); return err }},
		{"QueueOnErr", false, func(q *wq.Workqueue, fn func()) error { _, err := q.QueueOnErr(0, wq.NewWork(fn)); return err }},
		{"QueueBatch", false, func(q *wq.Workqueue, fn func()) error { return boolErr(q.QueueBatch(wq.NewWork(fn)) == 1) }},
		{"QueueKeyed", false, func(q *wq.Workqueue, fn func()) error { return boolErr(q.QueueKeyed(7, wq.NewWork(fn))) }},
		{"QueueContext", false, func(q *wq.Workqueue, fn func()) error {
			return q.QueueContext(context.Background(), wq.NewWork(fn))
		}},
		{"Go", false, func(q *wq.Workqueue, fn func()) error { return q.Go(fn) }},
		{"GoContext", false, func(q *wq.Workqueue, fn func()) error {
			return q.GoContext(context.Background(), func(context.Context) { fn() })
		}},
		{"Submit", false, func(q *wq.Workqueue, fn func()) error {
			f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { fn(); return 0, nil })
			select {
			case <-f.Done(): // refused at once (a queued fn cannot have run: the gate holds q)
				_, err := f.Wait(context.Background())
				return err
			default:
				return nil
			}
		}},
		{"QueueDelayed0", false, func(q *wq.Workqueue, fn func()) error {
			return boolErr(q.QueueDelayed(wq.NewDelayedWork(fn), 0))
		}},
		{"QueueDelayed", true, func(q *wq.Workqueue, fn func()) error {
			return boolErr(q.QueueDelayed(wq.NewDelayedWork(fn), time.Millisecond))
		}},
		{"QueueDelayedOn", true, func(q *wq.Workqueue, fn func()) error {
			return boolErr(q.QueueDelayedOn(0, wq.NewDelayedWork(fn), time.Millisecond))
		}},
		// ModDelayed of an idle item returns false whether it queued it
		// or not: whether it ran tells.
		{"ModDelayed0", false, func(q *wq.Workqueue, fn func()) error {
			q.ModDelayed(wq.NewDelayedWork(fn), 0)
			return nil
		}},
		{"ModDelayed", true, func(q *wq.Workqueue, fn func()) error {
			q.ModDelayed(wq.NewDelayedWork(fn), time.Millisecond)
			return nil
		}},
	}
}

// TestAdmissionTable: every entry in every lifecycle state, from outside
// the queue and from one of its own items (admit.go's table):
//   - live: accepted;
//   - draining: accepted from q's own items only (outside: ErrDraining,
//     not ErrDestroyed);
//   - destroying: as draining, except that arming a timer is refused
//     from anywhere (outside: an error matching both ErrDraining and
//     ErrDestroyed);
//   - destroyed: refused (ErrDestroyed).
//
// An accepted item runs exactly once; a refused one never runs. Catches
// an entry that skips the lifecycle check (QueueDelayed with a delay
// during Drain was accepted), and one that refuses chained work.
func TestAdmissionTable(t *testing.T) {
	for _, state := range []string{"live", "draining", "destroying", "destroyed"} {
		for _, inside := range []bool{false, true} {
			if inside && state == "destroyed" {
				continue // no item of a destroyed queue runs
			}
			name := state + "/outside"
			if inside {
				name = state + "/inside"
			}
			t.Run(name, func(t *testing.T) { admissionRow(t, state, inside) })
		}
	}
}

func admissionRow(t *testing.T, state string, inside bool) {
	q, err := wq.Alloc("adm-"+state, wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	var destroyOnce sync.Once
	destroy := func() { destroyOnce.Do(q.Destroy) }
	defer destroy()

	// The agent is an item of q that runs calls handed to it, so that
	// they come from one of q's own items; it also keeps a Drain or a
	// Destroy from finishing until it returns.
	calls := make(chan func())
	agentStarted := make(chan struct{})
	agentDone := make(chan struct{})
	if state != "destroyed" {
		if !q.Queue(wq.NewWork(func() {
			close(agentStarted)
			for f := range calls {
				f()
			}
			close(agentDone)
		})) {
			t.Fatal("Queue(agent) = false")
		}
		waitChan(t, "agent", agentStarted)
	}
	var over sync.WaitGroup // the Drain or Destroy in progress
	switch state {
	case "draining":
		over.Go(q.Drain)
		waitFor(t, "Drain to begin", func() bool { return q.Life() == "draining" })
	case "destroying":
		over.Go(destroy)
		waitFor(t, "Destroy to begin", func() bool { return q.Life() == "destroying" })
	case "destroyed":
		destroy()
	}
	if got := q.Life(); got != state {
		t.Fatalf("lifecycle %q, want %q", got, state)
	}

	entries := admEntries()
	runs := make([]atomic.Int32, len(entries))
	errs := make([]error, len(entries))
	for i, e := range entries {
		fn := func() { runs[i].Add(1) }
		if inside {
			done := make(chan struct{})
			calls <- func() { errs[i] = e.call(q, fn); close(done) }
			<-done
		} else {
			errs[i] = e.call(q, fn)
		}
	}
	if state != "destroyed" {
		close(calls)
		waitChan(t, "agent", agentDone)
	}
	over.Wait()
	accepts := func(e admEntry) bool {
		switch state {
		case "live":
			return true
		case "draining":
			return inside
		case "destroying":
			return inside && !e.arms
		}
		return false
	}
	// Accepted items run; delayed ones when their timer fires, which
	// Destroy would cancel: wait before it.
	for i, e := range entries {
		if accepts(e) {
			waitFor(t, e.name+" to run", func() bool { return runs[i].Load() >= 1 })
		}
	}
	destroy()

	for i, e := range entries {
		if accepts(e) {
			if errs[i] != nil {
				t.Errorf("%s: %v, want accepted", e.name, errs[i])
			}
			if n := runs[i].Load(); n != 1 {
				t.Errorf("%s: ran %d times, want 1", e.name, n)
			}
			continue
		}
		if n := runs[i].Load(); n != 0 {
			t.Errorf("%s: refused entry ran %d times (err %v)", e.name, n, errs[i])
		}
		err := errs[i]
		if err == nil && e.name != "ModDelayed0" && e.name != "ModDelayed" {
			t.Errorf("%s: accepted, want refused", e.name)
			continue
		}
		if err == nil || err == errRefusedBool {
			continue
		}
		switch state {
		case "draining":
			if !errors.Is(err, wq.ErrDraining) || errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("%s: %v, want ErrDraining only", e.name, err)
			}
		case "destroying":
			if !errors.Is(err, wq.ErrDraining) || !errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("%s: %v, want an error matching ErrDraining and ErrDestroyed", e.name, err)
			}
		case "destroyed":
			if !errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("%s: %v, want ErrDestroyed", e.name, err)
			}
		}
	}
}

// drainBehindGate queues a gate item on q, starts q.Drain on its own
// goroutine and returns once q is draining: openGate lets the gate (and so
// the Drain) finish, drained is closed when Drain returns. The gate is
// opened at cleanup too, before q's Destroy, also after a failure.
func drainBehindGate(t *testing.T, q *wq.Workqueue) (openGate func(), drained chan struct{}) {
	t.Helper()
	g := newKeyGate()
	openGate = sync.OnceFunc(func() { close(g.open) })
	t.Cleanup(openGate)
	if !q.Queue(g.w) {
		t.Fatal("Queue(gate) = false")
	}
	waitChan(t, "gate", g.started)
	drained = make(chan struct{})
	go func() { q.Drain(); close(drained) }()
	waitFor(t, "Drain to begin", func() bool { return q.Life() == "draining" })
	return openGate, drained
}

// TestQueueDelayedDuringDrainRefused: during Drain, QueueDelayed with a
// delay from outside returns false, reports ErrDraining and the item never
// runs, as Drain's doc says; QueueErr of the same moment agrees.
func TestQueueDelayedDuringDrainRefused(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "adm-delayed-drain", wq.Unbound, 0)
	openGate, drained := drainBehindGate(t, q)
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	if q.QueueDelayed(dw, time.Millisecond) {
		t.Error("QueueDelayed(1 ms) during Drain = true, want false")
	}
	if errs.count(wq.ErrDraining) != 1 {
		t.Errorf("ErrDraining reported %d times, want 1", errs.count(wq.ErrDraining))
	}
	if dw.Pending() {
		t.Error("refused delayed item left pending")
	}
	openGate()
	waitChan(t, "Drain", drained)
	time.Sleep(20 * time.Millisecond) // a wrongly armed timer would fire by now, mostly
	q.Flush()
	if n := ran.Load(); n != 0 {
		t.Errorf("refused delayed item ran %d times", n)
	}
}

// TestModDelayedFromAnotherQueueRefusedWhileDraining: an item pending on
// queue p is moved by ModDelayed onto q while q drains, from outside q:
// the call is refused before it touches the item (ErrDraining), which
// stays pending on p and runs there.
func TestModDelayedFromAnotherQueueRefusedWhileDraining(t *testing.T) {
	errs := captureErrors(t)
	p := mustAlloc(t, "adm-mod-p", wq.Unbound, 0)
	q := mustAlloc(t, "adm-mod-q", wq.Unbound, 0)
	openGate, drained := drainBehindGate(t, q)
	ranOn := make(chan string, 2)
	var dw *wq.DelayedWork
	dw = wq.NewDelayedWork(func() { ranOn <- "ran" })
	if !p.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed on p = false")
	}
	for _, d := range []time.Duration{0, time.Millisecond} {
		if q.ModDelayed(dw, d) {
			t.Errorf("ModDelayed(%v) onto a draining queue from outside = true, want false (refused)", d)
		}
		if !dw.Armed() {
			t.Fatalf("ModDelayed(%v) refused by q touched the item armed on p", d)
		}
	}
	if errs.count(wq.ErrDraining) == 0 {
		t.Error("refusal not reported as ErrDraining")
	}
	openGate()
	waitChan(t, "Drain", drained)
	if !p.ModDelayed(dw, 0) {
		t.Error("the item was not pending on p any more")
	}
	select {
	case <-ranOn:
	case <-time.After(30 * time.Second):
		t.Fatal("the item never ran on p")
	}
}

// TestModDelayedFromAnotherQueueIsBounded: ModDelayed(dw, 0) of an item
// pending on another queue gives q a new instance: q's MaxPending bounds
// it (ErrQueueFull) instead of counting it as one q admitted before.
func TestModDelayedFromAnotherQueueIsBounded(t *testing.T) {
	errs := captureErrors(t)
	p := mustAlloc(t, "adm-bound-p", wq.Unbound, 0)
	q := allocBounded(t, "adm-bound-q", wq.Unbound, 1, 1)
	b := newBlocker()
	defer b.free()
	if !q.Queue(b.w) {
		t.Fatal("Queue(blocker) = false")
	}
	b.waitStarted(t)
	if !q.Queue(wq.NewWork(func() {})) { // the one pending slot
		t.Fatal("Queue(filler) = false")
	}
	dw := wq.NewDelayedWork(func() {})
	if !p.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed on p = false")
	}
	q.ModDelayed(dw, 0)
	if n := q.Stats().Pending; n > 1 {
		t.Errorf("q has %d items pending after ModDelayed from p, want at most MaxPending 1", n)
	}
	if errs.count(wq.ErrQueueFull) != 1 {
		t.Errorf("ErrQueueFull reported %d times, want 1", errs.count(wq.ErrQueueFull))
	}
	// An instance pending on q itself is not a new one: re-queued at once
	// even while q is full.
	dq := wq.NewDelayedWork(func() {})
	if !q.QueueDelayed(dq, time.Hour) {
		t.Fatal("QueueDelayed on q = false")
	}
	if !q.ModDelayed(dq, 0) {
		t.Error("ModDelayed of an instance armed on q = false, want true")
	}
	if !dq.Pending() {
		t.Error("instance armed on q refused by its own MaxPending when re-queued")
	}
	b.free()
	q.Flush()
}

// TestDelayedFlushRacingDestroyRunsTheItem: DelayedWork.Flush takes the
// armed instance off its timer and queues it. A Destroy that begins in
// between (here: from the tracer's queue_work event of that very queueing,
// which runs after the admission checks) must wait for it and run it:
// the instance was accepted before the destroy. It must not finish its
// drain first, leaving the instance to be refused after the drain and
// lost (it neither runs nor is reported as ErrDelayedPending).
func TestDelayedFlushRacingDestroyRunsTheItem(t *testing.T) {
	destroyInTransit(t, "adm-flush-destroy", func(q *wq.Workqueue, dw *wq.DelayedWork) { dw.Flush() })
}

// TestModDelayedRacingDestroyRunsTheItem: ModDelayed(dw, 0) of an
// instance armed on q, with Destroy beginning between its grab and its
// queueing: as for DelayedWork.Flush, the instance runs.
func TestModDelayedRacingDestroyRunsTheItem(t *testing.T) {
	destroyInTransit(t, "adm-mod-destroy", func(q *wq.Workqueue, dw *wq.DelayedWork) { q.ModDelayed(dw, 0) })
}

func destroyInTransit(t *testing.T, name string, op func(q *wq.Workqueue, dw *wq.DelayedWork)) {
	errs := captureErrors(t)
	q, err := wq.Alloc(name, wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	if !q.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed = false")
	}
	destroyed := make(chan struct{})
	var fired atomic.Bool
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind != wqtrace.QueueWork || ev.Workqueue != name || !fired.CompareAndSwap(false, true) {
			return
		}
		go func() { q.Destroy(); close(destroyed) }()
		// Destroy must wait for this queueing; give it the time to
		// finish if it does not.
		select {
		case <-destroyed:
		case <-time.After(time.Second):
		}
	}))
	defer wq.SetTracer(nil)
	op(q, dw)
	waitChan(t, "Destroy", destroyed)
	wq.SetTracer(nil)
	if !fired.Load() {
		t.Fatal("the queueing was not traced")
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the armed instance ran %d times, want 1 (%d ErrDelayedPending, %d ErrDestroyed reports)",
			n, errs.count(wq.ErrDelayedPending), errs.count(wq.ErrDestroyed))
	}
}

// TestNilRules: one rule for nil. A nil context is refused with
// ErrInvalidArgument by every call that takes one, before anything
// changes (DestroyContext(nil) begins no destroy, FreezeAllContext(nil)
// freezes nothing); NewGroup(nil) takes context.Background(). On a nil
// *Workqueue the error calls return ErrInvalidArgument and the bool calls
// return false and report it; nothing panics.
func TestNilRules(t *testing.T) {
	errs := captureErrors(t)
	t.Cleanup(wq.ThawAll) // a FreezeAllContext(nil) that froze must not hold other tests' queues
	q := mustAlloc(t, "adm-nil", wq.Unbound|wq.Freezable, 0)
	w := wq.NewWork(func() {})
	dw := wq.NewDelayedWork(func() {})
	var nilCtx context.Context
	for name, f := range map[string]func() error{
		"QueueContext":      func() error { return q.QueueContext(nilCtx, w) },
		"FlushContext":      func() error { return q.FlushContext(nilCtx) },
		"DrainContext":      func() error { return q.DrainContext(nilCtx) },
		"DestroyContext":    func() error { return q.DestroyContext(nilCtx) },
		"GoContext":         func() error { return q.GoContext(nilCtx, func(context.Context) {}) },
		"FreezeAllContext":  func() error { return wq.FreezeAllContext(nilCtx) },
		"Work.FlushContext": func() error { _, err := w.FlushContext(nilCtx); return err },
		"Delayed.FlushCtx":  func() error { _, err := dw.FlushContext(nilCtx); return err },
		"CancelSyncContext": func() error { _, err := w.CancelSyncContext(nilCtx); return err },
		"Submit": func() error {
			_, err := wq.Submit(q, nilCtx, func(context.Context) (int, error) { return 0, nil }).Wait(context.Background())
			return err
		},
		"Future.Wait": func() error {
			_, err := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 0, nil }).Wait(nilCtx)
			return err
		},
		"nil q QueueErr":     func() error { _, err := (*wq.Workqueue)(nil).QueueErr(w); return err },
		"nil q QueueOnErr":   func() error { _, err := (*wq.Workqueue)(nil).QueueOnErr(0, w); return err },
		"nil q Go":           func() error { return (*wq.Workqueue)(nil).Go(func() {}) },
		"nil q GoContext":    func() error { return (*wq.Workqueue)(nil).GoContext(context.Background(), func(context.Context) {}) },
		"nil q QueueContext": func() error { return (*wq.Workqueue)(nil).QueueContext(context.Background(), w) },
		"nil q Flush":        func() error { return (*wq.Workqueue)(nil).FlushContext(context.Background()) },
		"nil q Drain":        func() error { return (*wq.Workqueue)(nil).DrainContext(context.Background()) },
		"nil q Destroy":      func() error { return (*wq.Workqueue)(nil).DestroyContext(context.Background()) },
		"nil q SetMaxActive": func() error { return (*wq.Workqueue)(nil).SetMaxActive(4) },
		"nil q SetNice":      func() error { return (*wq.Workqueue)(nil).SetNice(1) },
		"nil q SetAttr":      func() error { return (*wq.Workqueue)(nil).SetAttr("nice", "1") },
		"nil q Attr":         func() error { _, err := (*wq.Workqueue)(nil).Attr("nice"); return err },
		"nil q Submit": func() error {
			_, err := wq.Submit[int](nil, context.Background(), nil).Wait(context.Background())
			return err
		},
		"nil q Group": func() error {
			g, _ := (*wq.Workqueue)(nil).NewGroup(context.Background())
			g.Go(func(context.Context) error { return nil })
			return g.Wait()
		},
	} {
		var err error
		mustReturn(t, name, func() { err = f() })
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := q.Life(); got != "live" {
		t.Errorf("after DestroyContext(nil) and DrainContext(nil) the queue is %q, want live", got)
	}
	if !q.Queue(w) {
		t.Error("Queue after DestroyContext(nil) = false")
	}
	q.Flush()
	// FreezeAllContext(nil) froze nothing: an item runs.
	ran := make(chan struct{})
	if !q.Queue(wq.NewWork(func() { close(ran) })) {
		t.Fatal("Queue = false")
	}
	waitChan(t, "item after FreezeAllContext(nil)", ran)
	// NewGroup(nil): context.Background.
	g, gctx := q.NewGroup(nil) //nolint:staticcheck // nil ctx is the input under test
	if gctx == nil || gctx.Err() != nil {
		t.Errorf("NewGroup(nil) context = %v", gctx)
	}
	g.Go(func(context.Context) error { return nil })
	if err := g.Wait(); err != nil {
		t.Errorf("group of NewGroup(nil): %v", err)
	}

	// The bool and void calls on a nil queue: false (or 0) and a report.
	var nq *wq.Workqueue
	before := errs.count(wq.ErrInvalidArgument)
	bools := map[string]func() bool{
		"Queue":          func() bool { return nq.Queue(w) },
		"QueueOn":        func() bool { return nq.QueueOn(0, w) },
		"QueueNode":      func() bool { return nq.QueueNode(0, w) },
		"QueueKeyed":     func() bool { return nq.QueueKeyed(1, w) },
		"QueueDelayed":   func() bool { return nq.QueueDelayed(dw, time.Millisecond) },
		"QueueDelayedOn": func() bool { return nq.QueueDelayedOn(0, dw, time.Millisecond) },
		"ModDelayed":     func() bool { return nq.ModDelayed(dw, 0) },
		"ModDelayedOn":   func() bool { return nq.ModDelayedOn(0, dw, 0) },
		"QueueBatch":     func() bool { return nq.QueueBatch(w) != 0 },
		"CancelPending":  func() bool { return nq.CancelPending() != 0 },
		"Flush":          func() bool { nq.Flush(); return false },
		"Drain":          func() bool { nq.Drain(); return false },
		"Destroy":        func() bool { nq.Destroy(); return false },
	}
	for name, f := range bools {
		var got bool
		mustReturn(t, "nil "+name, func() { got = f() })
		if got {
			t.Errorf("nil *Workqueue %s = true", name)
		}
	}
	if n := errs.count(wq.ErrInvalidArgument) - before; n != len(bools) {
		t.Errorf("%d ErrInvalidArgument reports for %d calls on a nil *Workqueue", n, len(bools))
	}
	if w.Pending() || dw.Pending() {
		t.Error("a call on a nil *Workqueue left its item pending")
	}
}

// TestEdgeOrder: a destroyed queue says ErrDestroyed whatever the
// arguments (a nil function, a CPU that does not exist); on a live queue
// a nil function is ErrNoFunc naming the Go layer's call.
func TestEdgeOrder(t *testing.T) {
	q := mustAlloc(t, "adm-edges", wq.Unbound, 0)
	for name, c := range map[string]struct {
		err  error
		text string
	}{
		"Go":        {q.Go(nil), "Workqueue.Go: nil function"},
		"GoContext": {q.GoContext(context.Background(), nil), "Workqueue.GoContext: nil function"},
		"Submit": {func() error {
			_, err := wq.Submit[int](q, context.Background(), nil).Wait(context.Background())
			return err
		}(), "Submit: nil function"},
		"Group.Go": {func() error {
			g, _ := q.NewGroup(context.Background())
			g.Go(nil)
			return g.Wait()
		}(), "Group.Go: nil function"},
	} {
		if !errors.Is(c.err, wq.ErrNoFunc) || c.err.Error() != "wq: "+c.text {
			t.Errorf("%s(nil) = %v, want ErrNoFunc %q", name, c.err, "wq: "+c.text)
		}
	}
	q.Destroy()
	checks := map[string]error{
		"Go(nil)":             q.Go(nil),
		"GoContext(nil fn)":   q.GoContext(context.Background(), nil),
		"QueueContext(nil)":   q.QueueContext(context.Background(), nil),
		"QueueOnErr(-1, nil)": func() error { _, err := q.QueueOnErr(-1, nil); return err }(),
		"QueueErr(zero Work)": func() error { _, err := q.QueueErr(&wq.Work{}); return err }(),
		"Submit(nil fn)": func() error {
			_, err := wq.Submit[int](q, context.Background(), nil).Wait(context.Background())
			return err
		}(),
		"Group.Go(nil)":        func() error { g, _ := q.NewGroup(context.Background()); g.Go(nil); return g.Wait() }(),
		"GoContext(done ctx)":  q.GoContext(func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }(), func(context.Context) {}),
		"QueueOnErr(-1, Work)": func() error { _, err := q.QueueOnErr(-1, wq.NewWork(func() {})); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, wq.ErrDestroyed) {
			t.Errorf("%s on a destroyed queue = %v, want ErrDestroyed first", name, err)
		}
	}
}

// TestModDelayedFromAnotherQueueRacingDrainKeepsTheItem: ModDelayed(dw,
// 0) onto q of an instance pending on queue p passes q's lifecycle check
// while q is live; a Drain of q begins before it has taken the instance
// off p (here: the instance is in transit on p, inside the tracer's
// queue_work event, so ModDelayed's grab waits for it). The instance it
// then takes off p was accepted: it must run once (on q, which the drain
// waits for), not be cancelled by a second lifecycle check after the
// grab while ModDelayed returns true.
func TestModDelayedFromAnotherQueueRacingDrainKeepsTheItem(t *testing.T) {
	modDelayedMovedRacing(t, "adm-mvd-drain", time.Duration(0), func(q *wq.Workqueue, g *keyGate) (string, func()) {
		if !q.Queue(g.w) {
			t.Fatal("Queue(gate) = false")
		}
		waitChan(t, "gate", g.started)
		drained := make(chan struct{})
		go func() { q.Drain(); close(drained) }()
		return "draining", func() { waitChan(t, "Drain", drained) }
	})
}

// TestModDelayedFromAnotherQueueRacingDestroyKeepsTheItem: as above with
// a delay and Destroy: ModDelayed passed q's lifecycle check and counted
// itself in transit before Destroy began, so Destroy's closeTimers waits
// for it; the instance taken off p must then be queued on q at once
// (arming is closed) and run by Destroy's drain, not cancelled.
func TestModDelayedFromAnotherQueueRacingDestroyKeepsTheItem(t *testing.T) {
	modDelayedMovedRacing(t, "adm-mvd-destroy", time.Hour, func(q *wq.Workqueue, g *keyGate) (string, func()) {
		destroyed := make(chan struct{})
		go func() { q.Destroy(); close(destroyed) }()
		return "destroying", func() { waitChan(t, "Destroy", destroyed) }
	})
}

// modDelayedMovedRacing runs ModDelayed(dw, d) onto q for dw in transit
// on p, starts begin's lifecycle change of q once ModDelayed is in
// transit, then lets dw reach p.
func modDelayedMovedRacing(t *testing.T, name string, d time.Duration, begin func(q *wq.Workqueue, g *keyGate) (string, func())) {
	errs := captureErrors(t)
	// p runs one item at a time, and a blocker holds it: dw stays
	// pending on p until ModDelayed takes it.
	p, err := wq.AllocOrdered(name+"-p", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Destroy)
	b := newBlocker()
	t.Cleanup(b.free)
	if !p.Queue(b.w) {
		t.Fatal("Queue(blocker) on p = false")
	}
	b.waitStarted(t)
	q, err := wq.Alloc(name+"-q", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	g := newKeyGate()
	openGate := sync.OnceFunc(func() { close(g.open) })
	t.Cleanup(openGate) // before q's Destroy, also after a failure
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	modded := make(chan bool, 1)
	var fired atomic.Bool
	var wait func()
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind != wqtrace.QueueWork || ev.Workqueue != p.Name() || !fired.CompareAndSwap(false, true) {
			return
		}
		// dw is in transit on p: ModDelayed's grab waits for it.
		go func() { modded <- q.ModDelayed(dw, d) }()
		waitFor(t, "ModDelayed in transit", func() bool { return q.TimersFiring() > 0 })
		var state string
		state, wait = begin(q, g)
		waitFor(t, "q "+state, func() bool { return q.Life() == state })
	}))
	defer wq.SetTracer(nil)
	if !p.QueueDelayed(dw, 0) {
		t.Fatal("QueueDelayed on p = false")
	}
	wq.SetTracer(nil)
	if !fired.Load() {
		t.Fatal("the queueing on p was not traced")
	}
	was := <-modded
	openGate()
	wait()
	b.free()
	p.Flush()
	if !was {
		t.Errorf("ModDelayed = false, want true (dw was pending on p)")
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("the instance moved from p ran %d times, want 1 (%d ErrDraining, %d ErrDestroyed reports)",
			n, errs.count(wq.ErrDraining), errs.count(wq.ErrDestroyed))
	}
}

// TestAcceptedWorkRunsAcrossDrainAndDestroy: producers from outside q
// and q's own items (chained work) use every kind of entry (Queue, Go,
// QueueKeyed, QueueDelayed on q and on another queue p, ModDelayed from
// p onto q, DelayedWork.Flush) while q is drained twice (one DrainContext
// gives up at once) and destroyed. Every call that returned true or nil
// must have run once Destroy returned, or, for an armed item, been
// reported cancelled by Destroy (ErrDelayedPending). A stress, round
// after round, for the races no hook opens.
func TestAcceptedWorkRunsAcrossDrainAndDestroy(t *testing.T) {
	budget := 8 * time.Second
	if testing.Short() {
		budget = 2 * time.Second
	}
	deadline := time.Now().Add(budget)
	for round := 0; round < 400 && time.Now().Before(deadline); round++ {
		admStressRound(t, round)
		if t.Failed() {
			return
		}
	}
}

var admReCancelled = regexp.MustCompile(`(\d+) armed item\(s\) cancelled`)

func admStressRound(t *testing.T, round int) {
	var mu sync.Mutex
	cancelled := 0
	wq.SetErrorHandler(func(op, fn string, err error) {
		if m := admReCancelled.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			mu.Lock()
			cancelled += n
			mu.Unlock()
		}
	})
	defer wq.SetErrorHandler(nil)
	p := mustAlloc(t, fmt.Sprintf("adm-stress-p-%d", round), wq.Unbound, 0)
	q, err := wq.Alloc(fmt.Sprintf("adm-stress-q-%d", round), wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		dw       *wq.DelayedWork
		ran      atomic.Int32
		accepted atomic.Bool
	}
	var recsMu sync.Mutex
	var recs []*rec
	var acceptedPlain, ranPlain atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	producer := func(seed uint64) {
		defer wg.Done()
		r := rand.New(rand.NewPCG(seed, 1))
		var mine []*rec
		for {
			select {
			case <-stop:
				return
			default:
			}
			switch r.IntN(8) {
			case 6, 7:
				// chained: an item of q queues onto q
				w := wq.NewWork(func() {
					ranPlain.Add(1)
					x := wq.NewWork(func() { ranPlain.Add(1) })
					if q.Queue(x) {
						acceptedPlain.Add(1)
					}
					if q.Go(func() { ranPlain.Add(1) }) == nil {
						acceptedPlain.Add(1)
					}
					if q.QueueKeyed(uint64(seed%3), wq.NewWork(func() { ranPlain.Add(1) })) {
						acceptedPlain.Add(1)
					}
				})
				if q.Queue(w) {
					acceptedPlain.Add(1)
				}
			case 0:
				w := wq.NewWork(func() { ranPlain.Add(1) })
				if q.Queue(w) {
					acceptedPlain.Add(1)
				}
			case 1:
				if q.Go(func() { ranPlain.Add(1) }) == nil {
					acceptedPlain.Add(1)
				}
			case 2:
				w := wq.NewWork(func() { ranPlain.Add(1) })
				if q.QueueKeyed(uint64(r.IntN(3)), w) {
					acceptedPlain.Add(1)
				}
			case 3, 4:
				rc := &rec{}
				rc.dw = wq.NewDelayedWork(func() { rc.ran.Add(1) })
				on := q
				if r.IntN(2) == 0 {
					on = p
				}
				if on.QueueDelayed(rc.dw, time.Duration(r.IntN(300))*time.Microsecond) {
					rc.accepted.Store(true)
					mine = append(mine, rc)
					recsMu.Lock()
					recs = append(recs, rc)
					recsMu.Unlock()
				}
			case 5:
				if len(mine) == 0 {
					continue
				}
				rc := mine[r.IntN(len(mine))]
				switch r.IntN(3) {
				case 0:
					q.ModDelayed(rc.dw, time.Duration(r.IntN(200))*time.Microsecond)
				case 1:
					q.ModDelayed(rc.dw, 0)
				case 2:
					rc.dw.Flush()
				}
			}
		}
	}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go producer(uint64(round*10 + i))
	}
	time.Sleep(2 * time.Millisecond)
	var dwg sync.WaitGroup
	for i := 0; i < 2; i++ {
		dwg.Add(1)
		go func() {
			defer dwg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i)*100*time.Microsecond)
			defer cancel()
			_ = q.DrainContext(ctx)
		}()
	}
	time.Sleep(time.Millisecond)
	q.Destroy()
	close(stop)
	wg.Wait()
	dwg.Wait()
	mu.Lock()
	c := cancelled
	mu.Unlock()
	lost := 0
	for _, rc := range recs {
		// An instance still armed, queued or running on p: Flush
		// queues it at once and waits for it.
		if rc.ran.Load() == 0 {
			rc.dw.Flush()
		}
		if rc.accepted.Load() && rc.ran.Load() == 0 {
			lost++
		}
	}
	if a, r := acceptedPlain.Load(), ranPlain.Load(); a != r {
		t.Errorf("round %d: %d plain items accepted, %d ran", round, a, r)
	}
	if lost > c {
		t.Errorf("round %d: %d accepted delayed items never ran, %d reported cancelled by Destroy", round, lost, c)
	}
	p.Destroy()
}

// TestNilItemsAndOptions: a nil item or delayed item given to any queue
// call returns false and reports ErrNoFunc, as an item without a function
// does (kthread's QueueWork already did); a nil Option is ignored. Before,
// each of these was a nil-pointer panic in the caller.
func TestNilItemsAndOptions(t *testing.T) {
	errs := captureErrors(t)
	q, err := wq.Alloc("nil-args", wq.Unbound, 0, nil)
	if err != nil {
		t.Fatalf("Alloc with a nil Option: %v", err)
	}
	defer q.Destroy()
	calls := map[string]func() bool{
		"Queue":          func() bool { return q.Queue(nil) },
		"QueueOn":        func() bool { return q.QueueOn(0, nil) },
		"QueueNode":      func() bool { return q.QueueNode(0, nil) },
		"QueueKeyed":     func() bool { return q.QueueKeyed(1, nil) },
		"QueueDelayed":   func() bool { return q.QueueDelayed(nil, time.Millisecond) },
		"QueueDelayedOn": func() bool { return q.QueueDelayedOn(0, nil, time.Millisecond) },
		"ModDelayed":     func() bool { return q.ModDelayed(nil, time.Millisecond) },
		"ModDelayedOn":   func() bool { return q.ModDelayedOn(0, nil, time.Millisecond) },
	}
	for name, call := range calls {
		before := errs.count(wq.ErrNoFunc)
		var got bool
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil) panicked: %v", name, r)
				}
			}()
			got = call()
		}()
		if got {
			t.Errorf("%s(nil) = true", name)
		}
		if errs.count(wq.ErrNoFunc) != before+1 {
			t.Errorf("%s(nil) did not report ErrNoFunc", name)
		}
	}
}
