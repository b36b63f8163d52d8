package wq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
	"golang.org/x/sys/unix"
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

func TestPanicRecovered(t *testing.T) {
	var got atomic.Pointer[wq.PanicInfo]
	wq.SetPanicHandler(func(pi wq.PanicInfo) { got.Store(&pi) })
	defer wq.SetPanicHandler(nil)
	q := mustAlloc(t, "panic", wq.PerCPU, 0)
	w := wq.NewWork(boom)
	q.QueueOn(0, w)
	w.Flush()
	pi := got.Load()
	if pi == nil {
		t.Fatal("panic handler not called")
	}
	if pi.Value != "boom" || pi.Workqueue != "panic" || pi.Func != "github.com/gowq/wq_test.boom" || len(pi.Stack) == 0 {
		t.Errorf("PanicInfo = %+v", *pi)
	}
	// The pool still serves.
	var ok atomic.Bool
	w2 := wq.NewWork(func() { ok.Store(true) })
	q.QueueOn(0, w2)
	w2.Flush()
	if !ok.Load() {
		t.Error("worker did not keep serving after a panic")
	}
	if q.Stat("completed") != 2 {
		t.Errorf("completed = %d, want 2 (a panicking item counts as completed)", q.Stat("completed"))
	}
}

// TestErrorHandlerExitReleasesItem: a queue call that refuses an item
// reports to the error handler only after it has let the item go. A
// handler that calls runtime.Goexit (t.Fatal does) or panics must not
// leave the refused item pending: it can be queued again and flushed, and
// Destroy leaves nothing pending. Before, both cases left it pending for
// good (found by a stranger's run).
func TestErrorHandlerExitReleasesItem(t *testing.T) {
	handlers := map[string]func(op, fn string, err error){
		"goexit": func(op, fn string, err error) { runtime.Goexit() },
		"panic":  func(op, fn string, err error) { panic(err) },
	}
	for name, h := range handlers {
		t.Run("keyconflict-"+name, func(t *testing.T) {
			q, err := wq.Alloc("eh-kc-"+name, wq.Unbound, 0, wq.WithErrorHandler(h))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(q.Destroy)
			started, gate := make(chan struct{}, 1), make(chan struct{})
			w := wq.NewWork(func() {
				select {
				case started <- struct{}{}:
				default:
				}
				<-gate
			})
			if !q.QueueKeyed(1, w) {
				t.Fatal("QueueKeyed(1) = false")
			}
			<-started // w runs under key 1
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { _ = recover() }()
				q.QueueKeyed(2, w) // ErrKeyConflict: the handler exits
			}()
			<-done
			close(gate)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := w.FlushContext(ctx); err != nil {
				t.Fatalf("Flush after the refused QueueKeyed: %v (Pending %v)", err, w.Pending())
			}
			if w.Pending() {
				t.Fatal("the refused item is still pending")
			}
		})
		t.Run("draining-"+name, func(t *testing.T) {
			q, err := wq.Alloc("eh-dr-"+name, wq.PerCPU, 0, wq.WithErrorHandler(h))
			if err != nil {
				t.Fatal(err)
			}
			started, gate := make(chan struct{}), make(chan struct{})
			q.Queue(wq.NewWork(func() { close(started); <-gate }))
			<-started
			drained := make(chan struct{})
			go func() { q.Drain(); close(drained) }()
			w := wq.NewWork(func() {})
			for { // queue from a goroutine of its own until the drain refuses w
				res, done := make(chan bool, 1), make(chan struct{})
				go func() {
					defer close(done)
					defer func() { _ = recover() }()
					res <- q.Queue(w) // refused: ErrDraining, and the handler exits
				}()
				<-done
				if ok := len(res) == 1 && <-res; ok {
					w.Flush() // queued before the drain began
					time.Sleep(time.Millisecond)
					continue
				}
				break
			}
			close(gate)
			<-drained
			q.Destroy()
			if w.Pending() {
				t.Fatal("an item refused during the drain is pending after Destroy")
			}
		})
	}
}

// calls records handler calls as "handler:queue-or-op".
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.got = append(c.got, s)
	c.mu.Unlock()
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.got)
	slices.Sort(out)
	return out
}

// TestPerQueueHandlers: two queues in one program each get their own
// panic and error handler's calls (WithPanicHandler, WithErrorHandler),
// and a queue without them falls back to the process-wide handlers.
func TestPerQueueHandlers(t *testing.T) {
	var c calls
	wq.SetPanicHandler(func(pi wq.PanicInfo) { c.add("global-panic:" + pi.Workqueue) })
	wq.SetErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrDestroyed) {
			c.add("global-error:" + op)
		}
	})
	t.Cleanup(func() { wq.SetPanicHandler(nil); wq.SetErrorHandler(nil) })

	alloc := func(name string, own bool) *wq.Workqueue {
		var opts []wq.Option
		if own {
			opts = append(opts,
				wq.WithPanicHandler(func(pi wq.PanicInfo) {
					c.add(fmt.Sprintf("%s-panic:%s:%v", name, pi.Workqueue, pi.Value))
				}),
				wq.WithErrorHandler(func(op, fn string, err error) {
					if errors.Is(err, wq.ErrDestroyed) {
						c.add(name + "-error:" + op)
					}
				}))
		}
		q, err := wq.Alloc(name, wq.Unbound, 1, opts...)
		if err != nil {
			t.Fatalf("Alloc(%q): %v", name, err)
		}
		return q
	}
	qa, qb, qc := alloc("hq-a", true), alloc("hq-b", true), alloc("hq-c", false)
	for _, q := range []*wq.Workqueue{qa, qb, qc} {
		w := wq.NewWork(func() { panic("boom") })
		if !q.Queue(w) {
			t.Fatalf("%s: Queue = false", q.Name())
		}
		q.Flush() // the handler runs before the item completes
	}
	if got, want := c.list(), []string{"global-panic:hq-c", "hq-a-panic:hq-a:boom", "hq-b-panic:hq-b:boom"}; !slices.Equal(got, want) {
		t.Fatalf("panic handler calls %q, want %q", got, want)
	}
	c.mu.Lock()
	c.got = nil
	c.mu.Unlock()
	for _, q := range []*wq.Workqueue{qa, qb, qc} {
		q.Destroy()
		if q.Queue(wq.NewWork(func() {})) {
			t.Fatalf("%s: Queue after Destroy = true", q.Name())
		}
	}
	if got, want := c.list(), []string{"global-error:queue_work_on", "hq-a-error:queue_work_on", "hq-b-error:queue_work_on"}; !slices.Equal(got, want) {
		t.Fatalf("error handler calls %q, want %q", got, want)
	}
}

// moveOffThreadHeld unlocks the calling goroutine from its thread (every
// lock level) and moves it to another thread, which it keeps occupied by
// a locked helper goroutine until release is called, so that the caller
// cannot come back to it meanwhile. ok is false if no move happened.
func moveOffThreadHeld() (release func(), ok bool) {
	old := unix.Gettid()
	for range 200 {
		runtime.UnlockOSThread()
	}
	for range 200 {
		hold := make(chan struct{})
		got := make(chan int)
		go func() {
			runtime.LockOSThread()
			got <- unix.Gettid()
			<-hold
			runtime.UnlockOSThread()
		}()
		time.Sleep(50 * time.Microsecond)
		if <-got == old && unix.Gettid() != old {
			return func() { close(hold) }, true
		}
		close(hold)
	}
	return func() {}, false
}

// A tracer may cancel the item of a queue_work event (Cancel returns
// false: the item is in transit, held by the tracer's own goroutine) also
// after it moved its goroutine to another thread. Before, the in-transit
// mark was the queuing thread's id, and Cancel waited for the item
// forever.
func TestTracerMayCancelItemOnQueueWorkAfterMove(t *testing.T) {
	q := mustAlloc(t, "tracer-cancel-moved", wq.Unbound, 0)
	var w *wq.Work
	ran := make(chan struct{}, 1)
	w = wq.NewWork(func() { ran <- struct{}{} })
	var moved, cancelled atomic.Bool
	var fired atomic.Int32
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind != wqtrace.QueueWork || ev.Workqueue != q.Name() || fired.Add(1) != 1 {
			return
		}
		release, ok := moveOffThreadHeld()
		moved.Store(ok)
		cancelled.Store(w.Cancel())
		release()
	}))
	t.Cleanup(func() { wq.SetTracer(nil) })
	var queued bool
	mustReturn(t, "Queue whose queue_work tracer cancels the item after a thread move", func() { queued = q.Queue(w) })
	wq.SetTracer(nil)
	if !moved.Load() {
		t.Skip("the tracer's goroutine did not move to another thread")
	}
	if cancelled.Load() || !queued {
		t.Errorf("Cancel from the tracer = %v (want false: in transit), Queue = %v (want true)", cancelled.Load(), queued)
	}
	waitChan(t, "the item", ran)
}

// TestObsFtraceRoundTrip: the ftrace text FtraceWriter writes for gowq's
// events parses back with wqtrace.Parse, the parser used for the kernel
// captures in testdata/ktrace, giving the four events of each item in
// order with the workqueue and function names.
func TestObsFtraceRoundTrip(t *testing.T) {
	const n = 8
	q := mustAlloc(t, "obs_trace", wq.PerCPU, 0)
	var buf bytes.Buffer
	fw := wqtrace.NewFtraceWriter(&buf)
	if err := fw.WriteHeader(wqtrace.Header{CPUs: runtime.NumCPU()}); err != nil {
		t.Fatal(err)
	}
	wq.SetTracer(fw)
	t.Cleanup(func() { wq.SetTracer(nil) })
	items := make([]*wq.Work, n)
	for i := range items {
		items[i] = wq.NewWork(obsTraced)
		if !q.QueueOn(0, items[i]) {
			t.Fatal("QueueOn returned false")
		}
	}
	q.Flush()
	wq.SetTracer(nil)
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	p := wqtrace.NewParser(bytes.NewReader(buf.Bytes()))
	p.Strict = true
	var evs []wqtrace.Event
	for p.Next() {
		evs = append(evs, p.Event())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("strict parse of gowq's ftrace text: %v", err)
	}
	if st := p.Stats(); st.Comments == 0 || st.Malformed != 0 {
		t.Errorf("parse stats %+v: want the header as comments, nothing malformed", st)
	}
	fn := items[0].Func()
	if fn != "github.com/gowq/wq_test.obsTraced" {
		t.Errorf("Func() = %q", fn)
	}
	kinds := []wqtrace.Kind{wqtrace.QueueWork, wqtrace.ActivateWork, wqtrace.ExecuteStart, wqtrace.ExecuteEnd}
	for i, w := range items {
		var mine []wqtrace.Event
		for _, e := range evs {
			if e.Work == workAddr(w) {
				mine = append(mine, e)
			}
		}
		if len(mine) != 4 {
			t.Fatalf("item %d: %d events, want 4:\n%s", i, len(mine), buf.String())
		}
		for j, e := range mine {
			if e.Kind != kinds[j] {
				t.Errorf("item %d event %d is %v, want %v", i, j, e.Kind, kinds[j])
			}
			if e.Function != fn {
				t.Errorf("item %d %v: function %q, want %q", i, e.Kind, e.Function, fn)
			}
			if j > 0 && e.TimeNs < mine[j-1].TimeNs {
				t.Errorf("item %d: %v at %d before %v at %d", i, e.Kind, e.TimeNs, mine[j-1].Kind, mine[j-1].TimeNs)
			}
			if e.TID <= 0 {
				t.Errorf("item %d %v: tid %d", i, e.Kind, e.TID)
			}
		}
		qe, start, end := mine[0], mine[2], mine[3]
		if qe.Workqueue != "obs_trace" || qe.ReqCPU != 0 || qe.TargetCPU != 0 {
			t.Errorf("item %d queue_work: workqueue %q req_cpu %d cpu %d, want obs_trace 0 0", i, qe.Workqueue, qe.ReqCPU, qe.TargetCPU)
		}
		if start.TID != end.TID || start.CPU != 0 || !regexp.MustCompile(`^kworker/0:\d+$`).MatchString(start.Comm) {
			t.Errorf("item %d: start %+v end %+v: want one kworker/0:N thread on CPU 0", i, start, end)
		}
	}

	// The same parser reads the kernel's own capture.
	f, err := os.Open("testdata/ktrace/idle-plus-fsync.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kp := wqtrace.NewParser(f)
	nk := 0
	for kp.Next() {
		nk++
	}
	if kp.Err() != nil || nk == 0 || kp.Stats().ByKind[wqtrace.ExecuteStart] == 0 {
		t.Errorf("kernel capture: %d events, err %v, stats %+v", nk, kp.Err(), kp.Stats())
	}
}

type obsNopTracer struct{}

func (obsNopTracer) Trace(*wqtrace.Event) {}

func benchWithTracer(b *testing.B, tr wqtrace.Tracer) {
	if tr != nil {
		wq.SetTracer(tr)
		defer wq.SetTracer(nil)
	}
	b.Run("queue", func(b *testing.B) { benchQueueOnly(b) })
	b.Run("roundtrip", benchQueueRoundTrip)
}

// BenchmarkQueueNoTracer measures queueing with no tracer installed, where
// each tracepoint costs one atomic load and an untaken branch: the queue
// call alone (queue) and queue -> execute -> idle (roundtrip).
func BenchmarkQueueNoTracer(b *testing.B) { benchWithTracer(b, nil) }

// BenchmarkQueueWithTracer is BenchmarkQueueNoTracer with a no-op tracer
// installed: the events are built and passed to it.
func BenchmarkQueueWithTracer(b *testing.B) { benchWithTracer(b, obsNopTracer{}) }

// TestPanicInfoWork: the panic handler learns which item panicked.
func TestPanicInfoWork(t *testing.T) {
	// Catches a PanicInfo without the item.
	got := make(chan *wq.Work, 1)
	q, err := wq.Alloc("lg-panic", wq.Unbound, 1, wq.WithPanicHandler(func(pi wq.PanicInfo) { got <- pi.Work }))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	w := wq.NewWork(func() { panic("x") })
	q.Queue(w)
	select {
	case pw := <-got:
		if pw != w {
			t.Fatalf("PanicInfo.Work = %p, want %p", pw, w)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("panic handler not called")
	}
}

func obsTraced() {}

func workAddr(w *wq.Work) uintptr { return uintptr(unsafe.Pointer(w)) }

func TestCallbackGoexitAndPanic(t *testing.T) {
	for _, kind := range []wqtrace.Kind{wqtrace.ExecuteStart, wqtrace.ExecuteEnd, wqtrace.QueueWork, wqtrace.ActivateWork} {
		for _, mode := range []string{"goexit", "panic"} {
			t.Run(kind.String()+"/"+mode, func(t *testing.T) {
				captureErrors(t)
				q := mustAlloc(t, "cbtrace", wq.PerCPU, 0)
				tr := &goexitTracer{kind: kind, fn: "TestCallbackGoexitAndPanic", mode: mode}
				wq.SetTracer(tr)
				defer wq.SetTracer(nil)
				var runs atomic.Int32
				w := wq.NewWork(func() { runs.Add(1) })
				// Queue from a goroutine: a Goexit in queue_work or
				// activate_work tracing ends that goroutine.
				go q.Queue(w)
				waitFor(t, "tracer fired", func() bool { return tr.fired.Load() > 0 })
				mustReturn(t, "Flush", func() { w.Flush() })
				waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
				// A Goexit in queue_work tracing leaves the item idle (not
				// queued); otherwise it ran exactly once.
				want := int32(1)
				if kind == wqtrace.QueueWork && mode == "goexit" {
					want = 0
				}
				if n := runs.Load(); n != want {
					t.Errorf("item ran %d times, want %d", n, want)
				}
				// The pool still serves.
				w2 := wq.NewWork(func() {})
				q.Queue(w2)
				mustReturn(t, "Flush after", func() { w2.Flush() })
				// Counters stay exact: each start counted once.
				if s := q.Stats(); s.Total != int64(want)+1 || s.Infl != 0 {
					t.Errorf("Stats: total %d infl %d, want total %d infl 0", s.Total, s.Infl, want+1)
				}
				mustReturn(t, "Destroy", q.Destroy)
			})
		}
	}
}

func TestPanicHandlerGoexitAndPanic(t *testing.T) {
	for _, mode := range []string{"goexit", "panic"} {
		for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound, wq.Unbound | wq.MemReclaim} {
			t.Run(mode+"/"+flags.String(), func(t *testing.T) {
				wq.SetPanicHandler(func(wq.PanicInfo) {
					if mode == "goexit" {
						runtime.Goexit()
					}
					panic("handler panic")
				})
				defer wq.SetPanicHandler(nil)
				captureErrors(t)
				q := mustAlloc(t, "cbpanic", flags, 0)
				for i := 0; i < 3; i++ {
					w := wq.NewWork(func() { panic("item") })
					q.Queue(w)
					mustReturn(t, "Flush", func() { w.Flush() })
					waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
				}
				mustReturn(t, "queue Flush", q.Flush)
				if s := q.Stats(); s.Panics != 3 || s.Infl != 0 {
					t.Errorf("stats: panics %d infl %d", s.Panics, s.Infl)
				}
			})
		}
	}
}

func TestErrorHandlerGoexitInItem(t *testing.T) {
	// The error handler runs on the worker when an item calls its own
	// CancelSync; a handler that calls Goexit ends the worker like a Goexit
	// in the item.
	wq.SetErrorHandler(func(op, fn string, err error) { runtime.Goexit() })
	defer wq.SetErrorHandler(nil)
	q := mustAlloc(t, "cberr", wq.PerCPU, 0)
	for i := 0; i < 3; i++ {
		var w *wq.Work
		w = wq.NewWork(func() { w.CancelSync() })
		q.Queue(w)
		mustReturn(t, "Flush", func() { w.Flush() })
	}
	mustReturn(t, "Destroy", q.Destroy)
}
