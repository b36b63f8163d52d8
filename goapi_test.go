package wq_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/wqtrace"
	"go.uber.org/goleak"
)

// TestGoRunsEachClosureOnce catches a closure lost or run twice through
// the free list of Go's items.
func TestGoRunsEachClosureOnce(t *testing.T) {
	for _, fl := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q := mustAlloc(t, "go-once", fl, 0)
		const n = 2000
		var runs [n]atomic.Int32
		for i := range n {
			if err := q.Go(func() { runs[i].Add(1) }); err != nil {
				t.Fatalf("%v: Go #%d: %v", fl, i, err)
			}
		}
		q.Flush()
		for i := range n {
			if c := runs[i].Load(); c != 1 {
				t.Fatalf("%v: closure %d ran %d times, want 1", fl, i, c)
			}
		}
	}
}

// TestGoRefusals catches a refusal that Go returns as nil (or not as its
// sentinel), or that it reports to the error handler as well.
func TestGoRefusals(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "go-refuse", wq.Unbound, 0)
	if err := q.Go(nil); !errors.Is(err, wq.ErrNoFunc) {
		t.Errorf("Go(nil) = %v, want ErrNoFunc", err)
	}
	if err := q.GoContext(context.Background(), nil); !errors.Is(err, wq.ErrNoFunc) {
		t.Errorf("GoContext(nil fn) = %v, want ErrNoFunc", err)
	}
	//lint:ignore SA1012 a nil context is the bad input under test
	if err := q.GoContext(nil, func(context.Context) {}); !errors.Is(err, wq.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("GoContext(nil ctx) = %v, want ErrInvalidArgument", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := q.GoContext(ctx, func(context.Context) { ran = true }); !errors.Is(err, context.Canceled) {
		t.Errorf("GoContext(cancelled ctx) = %v, want context.Canceled", err)
	}
	q.Destroy()
	if err := q.Go(func() { ran = true }); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("Go on a destroyed queue = %v, want ErrDestroyed", err)
	}
	if err := q.GoContext(context.Background(), func(context.Context) { ran = true }); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("GoContext on a destroyed queue = %v, want ErrDestroyed", err)
	}
	if ran {
		t.Error("a refused function ran")
	}
	if n := errs.count(wq.ErrDestroyed) + errs.count(wq.ErrNoFunc); n != 0 {
		t.Errorf("Go reported %d refusals to the error handler, want 0 (they are returned)", n)
	}
}

// TestGoWhileDraining catches Go accepted from outside a draining queue,
// or refused from inside one of its items (chained work).
func TestGoWhileDraining(t *testing.T) {
	q := mustAlloc(t, "go-drain", wq.Unbound, 0)
	release := make(chan struct{})
	started := make(chan struct{})
	var outside, inside error
	var chainedRan atomic.Bool
	if err := q.Go(func() {
		close(started)
		<-release
		inside = q.Go(func() { chainedRan.Store(true) })
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	drained := make(chan struct{})
	go func() { q.Drain(); close(drained) }()
	waitFor(t, "Go refused while draining", func() bool {
		outside = q.Go(func() {})
		return outside != nil
	})
	if !errors.Is(outside, wq.ErrDraining) {
		t.Errorf("Go from outside a draining queue = %v, want ErrDraining", outside)
	}
	close(release)
	<-drained
	if inside != nil || !chainedRan.Load() {
		t.Errorf("Go from the queue's own item while draining = %v (ran %v), want nil and run", inside, chainedRan.Load())
	}
}

// TestQueueErrReasons catches QueueErr returning an error for the dedup
// case, nil for a refusal, or reporting to the error handler.
func TestQueueErrReasons(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "queueerr", wq.Unbound, 0)
	release := make(chan struct{})
	blocker := wq.NewWork(func() { <-release })
	if ok, err := q.QueueErr(blocker); !ok || err != nil {
		t.Fatalf("QueueErr(idle) = %v, %v; want true, nil", ok, err)
	}
	waitFor(t, "blocker running", func() bool { return blocker.Busy()&wq.BusyRunning != 0 })
	w := wq.NewWork(func() {})
	if err := q.SetMaxActive(1); err != nil {
		t.Fatal(err)
	}
	if ok, err := q.QueueErr(w); !ok || err != nil {
		t.Fatalf("QueueErr(idle) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := q.QueueErr(w); ok || err != nil {
		t.Errorf("QueueErr(pending) = %v, %v; want false, nil (dedup is not an error)", ok, err)
	}
	close(release)
	q.Flush()

	if ok, err := q.QueueErr(nil); ok || !errors.Is(err, wq.ErrNoFunc) {
		t.Errorf("QueueErr(nil) = %v, %v; want false, ErrNoFunc", ok, err)
	}
	if ok, err := q.QueueErr(&wq.Work{}); ok || !errors.Is(err, wq.ErrNoFunc) {
		t.Errorf("QueueErr(zero Work) = %v, %v; want false, ErrNoFunc", ok, err)
	}
	w.Disable()
	if ok, err := q.QueueErr(w); ok || !errors.Is(err, wq.ErrDisabled) {
		t.Errorf("QueueErr(disabled) = %v, %v; want false, ErrDisabled", ok, err)
	}
	if q.Queue(w) {
		t.Error("Queue(disabled) = true")
	}
	w.Enable()
	if ok, err := q.QueueOnErr(1<<20, w); ok || !errors.Is(err, wq.ErrInvalidCPU) {
		t.Errorf("QueueOnErr(bad cpu) = %v, %v; want false, ErrInvalidCPU", ok, err)
	}
	if ok, err := q.QueueOnErr(0, w); !ok || err != nil {
		t.Errorf("QueueOnErr(0, idle) = %v, %v; want true, nil", ok, err)
	}
	q.Flush()
	// (Other reports, such as worker creation refused under nice 19 as an
	// unprivileged user, are not the queue calls'.)
	for _, e := range []error{wq.ErrNoFunc, wq.ErrDisabled, wq.ErrInvalidCPU, wq.ErrDestroyed, wq.ErrDraining} {
		if n := errs.count(e); n != 0 {
			t.Errorf("QueueErr/QueueOnErr reported %v %d times to the handler, want 0", e, n)
		}
	}
	// The bool calls keep reporting: Queue(nil) reports ErrNoFunc.
	q.Queue(nil)
	if errs.count(wq.ErrNoFunc) != 1 {
		t.Errorf("Queue(nil) reported ErrNoFunc %d times, want 1", errs.count(wq.ErrNoFunc))
	}
	q.Destroy()
	if ok, err := q.QueueErr(w); ok || !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("QueueErr on a destroyed queue = %v, %v; want false, ErrDestroyed", ok, err)
	}
	if w.Pending() {
		t.Error("a refused Work was left pending")
	}
}

// TestGoRacingDestroy catches a closure that Go accepted but that never
// ran (or ran twice) when Destroy races many Go calls, and refusals that
// are not ErrDestroyed or ErrDraining.
func TestGoRacingDestroy(t *testing.T) {
	for round := range 5 {
		q, err := wq.Alloc("go-race", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		var bad atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					err := q.Go(func() { ran.Add(1) })
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, wq.ErrDestroyed), errors.Is(err, wq.ErrDraining):
					default:
						bad.Store(err)
					}
				}
			}()
		}
		time.Sleep(time.Duration(1+round) * time.Millisecond)
		q.Destroy()
		close(stop)
		wg.Wait()
		if e := bad.Load(); e != nil {
			t.Fatalf("Go racing Destroy returned %v, want nil, ErrDestroyed or ErrDraining", e)
		}
		if a, r := accepted.Load(), ran.Load(); a != r {
			t.Fatalf("round %d: %d closures accepted, %d ran by the time Destroy returned", round, a, r)
		}
		if err := q.Go(func() {}); !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("Go after Destroy = %v", err)
		}
	}
}

// TestGoDuringDestroyMatchesBoth catches a refusal during Destroy's drain
// that matches only ErrDraining: callers check ErrDestroyed.
func TestGoDuringDestroyMatchesBoth(t *testing.T) {
	q, err := wq.Alloc("go-dying", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan struct{})
	if err := q.Go(func() { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	done := make(chan struct{})
	go func() { q.Destroy(); close(done) }()
	var got error
	waitFor(t, "Go refused during Destroy", func() bool { got = q.Go(func() {}); return got != nil })
	close(release)
	<-done
	if !errors.Is(got, wq.ErrDestroyed) || !errors.Is(got, wq.ErrDraining) {
		t.Errorf("Go during Destroy = %v, want an error matching ErrDestroyed and ErrDraining", got)
	}
}

// TestGoPanicGoesToPanicHandler catches a panic of a Go closure lost, or
// a worker that dies of it.
func TestGoPanicGoesToPanicHandler(t *testing.T) {
	got := make(chan wq.PanicInfo, 1)
	q, err := wq.Alloc("go-panic", wq.Unbound, 1, wq.WithPanicHandler(func(pi wq.PanicInfo) { got <- pi }))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	if err := q.Go(func() { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	pi := <-got
	if pi.Value != "boom" {
		t.Errorf("PanicInfo.Value = %v", pi.Value)
	}
	var after atomic.Bool
	if err := q.Go(func() { after.Store(true) }); err != nil {
		t.Fatal(err)
	}
	q.Flush()
	if !after.Load() {
		t.Error("the queue did not run an item after a panic")
	}
}

// TestGoContextSetsLabels catches a GoContext function run without its
// context's pprof labels, or a worker left with them after the item.
func TestGoContextSetsLabels(t *testing.T) {
	q := mustAlloc(t, "go-labels", wq.Unbound, 0)
	const label = "gowq-test-label-7f3a"
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("req", label))
	var during string
	if err := q.GoContext(ctx, func(ctx context.Context) {
		if v, _ := pprof.Label(ctx, "req"); v != label {
			t.Errorf("fn's ctx label = %q", v)
		}
		var buf bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
		during = buf.String()
	}); err != nil {
		t.Fatal(err)
	}
	q.Flush()
	if !bytes.Contains([]byte(during), []byte(label)) {
		t.Error("the goroutine profile taken inside fn shows no goroutine with ctx's labels")
	}
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	if bytes.Contains(buf.Bytes(), []byte(label)) {
		t.Error("a goroutine still carries ctx's labels after the item (the worker's labels were not restored)")
	}
}

// ctxTracer records the Context of ExecuteStart events.
type ctxTracer struct {
	mu   sync.Mutex
	ctxs []context.Context
}

func (c *ctxTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind == wqtrace.ExecuteStart {
		c.mu.Lock()
		c.ctxs = append(c.ctxs, ev.Context)
		c.mu.Unlock()
	}
}

type ctxKey struct{}

// TestGoContextEventCarriesContext catches an ExecuteStart event of a
// GoContext item without its context (RegionTracer could not parent the
// execution on the caller's task), or one of a plain item with one.
func TestGoContextEventCarriesContext(t *testing.T) {
	q := mustAlloc(t, "go-ctx-ev", wq.Unbound, 0)
	tr := &ctxTracer{}
	wq.SetTracer(tr)
	defer wq.SetTracer(nil)
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	if err := q.GoContext(ctx, func(context.Context) {}); err != nil {
		t.Fatal(err)
	}
	q.Flush()
	if err := q.Go(func() {}); err != nil {
		t.Fatal(err)
	}
	q.Flush()
	wq.SetTracer(nil)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.ctxs) != 2 {
		t.Fatalf("%d ExecuteStart events, want 2", len(tr.ctxs))
	}
	if c := tr.ctxs[0]; c == nil || c.Value(ctxKey{}) != "caller" {
		t.Errorf("ExecuteStart of a GoContext item has Context %v, want the caller's", c)
	}
	if tr.ctxs[1] != nil {
		t.Errorf("ExecuteStart of a Go item has Context %v, want nil", tr.ctxs[1])
	}
}

// TestGoItemsWellFormedEvents catches a free-list item reused while its
// previous run is still traced: every item address must go queue_work,
// execute_start, execute_end before it is queued again.
func TestGoItemsWellFormedEvents(t *testing.T) {
	q := mustAlloc(t, "go-events", wq.Unbound, 0)
	rec := wqtrace.NewRecorder(1 << 16)
	wq.SetTracer(rec)
	defer wq.SetTracer(nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				_ = q.Go(func() {})
			}
		}()
	}
	wg.Wait()
	q.Flush()
	wq.SetTracer(nil)
	last := map[uintptr]wqtrace.Kind{}
	for _, ev := range rec.Events() {
		if ev.Workqueue != "" && ev.Workqueue != "go-events" {
			continue
		}
		prev := last[ev.Work]
		ok := false
		switch ev.Kind {
		case wqtrace.QueueWork:
			ok = prev == 0 || prev == wqtrace.ExecuteEnd
		case wqtrace.ActivateWork:
			ok = prev == wqtrace.QueueWork
		case wqtrace.ExecuteStart:
			ok = prev == wqtrace.ActivateWork || prev == wqtrace.QueueWork
		case wqtrace.ExecuteEnd:
			ok = prev == wqtrace.ExecuteStart
		}
		if !ok {
			t.Fatalf("item %#x: %v after %v", ev.Work, ev.Kind, prev)
		}
		last[ev.Work] = ev.Kind
	}
}

func nop() {}

// BenchmarkGo measures Go of a function with no captured variables (no
// closure to allocate): the cost of the submit path alone, and its
// allocations (0 once the free list is warm). Compare with
// BenchmarkQueueNoTracer/queue.
func BenchmarkGo(b *testing.B) {
	q, err := wq.Alloc("bench-go", wq.Unbound, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	benchGoCalls(b, q, func() error { return q.Go(nop) })
}

// BenchmarkGoContext is BenchmarkGo for GoContext with a context that
// carries pprof labels (the worker sets and removes them per item).
func BenchmarkGoContext(b *testing.B) {
	q, err := wq.Alloc("bench-goctx", wq.Unbound, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("k", "v"))
	fn := func(context.Context) {}
	benchGoCalls(b, q, func() error { return q.GoContext(ctx, fn) })
}

// TestGoItemDisabledByRecorderNotReused catches a Go item recycled onto
// the free list while disabled: the stage recorder is handed the item's
// Work (Stages.Work) and may Disable it during the call; a later Go that
// takes that item from the free list then fails with ErrDisabled, which
// Go never returns for a caller's closure.
func TestGoItemDisabledByRecorderNotReused(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the free list's per-P cache hands the item back
	q := mustAlloc(t, "go-rec-disable", wq.Unbound, 1)
	var disable atomic.Bool
	labsys.SetStageRecorder(func(s *labsys.Stages) {
		if s.Workqueue == "go-rec-disable" && disable.CompareAndSwap(true, false) {
			s.Work.(*wq.Work).Disable()
		}
	})
	defer labsys.SetStageRecorder(nil)
	for round := range 40 {
		disable.Store(true)
		if err := q.Go(func() {}); err != nil {
			t.Fatal(err)
		}
		q.Flush()
		for range 4 {
			err := q.Go(func() {})
			if errors.Is(err, wq.ErrDisabled) {
				t.Fatalf("round %d: Go = %v: a disabled item came back from the free list", round, err)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		q.Flush()
	}
}

// TestGoGoexitAndUnlockOSThreadKeepServing catches a queue left without a
// worker, or a Flush that hangs, after Go functions that call
// runtime.Goexit or runtime.UnlockOSThread (and then block, so that the
// goroutine may move off the worker's thread).
func TestGoGoexitAndUnlockOSThreadKeepServing(t *testing.T) {
	q := mustAlloc(t, "go-goexit-unlock", wq.Unbound, 2)
	var ran atomic.Int64
	for i := range 40 {
		var err error
		switch i % 4 {
		case 0:
			err = q.Go(func() { ran.Add(1); runtime.Goexit() })
		case 1:
			err = q.Go(func() { ran.Add(1); runtime.UnlockOSThread(); time.Sleep(50 * time.Microsecond) })
		case 2:
			err = q.GoContext(context.Background(), func(context.Context) { ran.Add(1); runtime.Goexit() })
		default:
			err = q.Go(func() { ran.Add(1) })
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(60 * time.Second):
		t.Fatalf("Flush hangs after Goexit/UnlockOSThread in Go functions; %d of 40 ran", ran.Load())
	}
	if ran.Load() != 40 {
		t.Fatalf("%d of 40 ran by the time Flush returned", ran.Load())
	}
}

// TestGoGroupSubmitRacingDestroyNoLeak catches, with 10k calls of Go,
// Group.Go and Submit racing Destroy: an accepted closure that never
// runs, a Group.Wait or Future.Wait that hangs, a refusal that matches
// neither ErrDestroyed nor ErrDraining, and goroutines left behind.
func TestGoGroupSubmitRacingDestroyNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	q, err := wq.Alloc("go-10k-destroy", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := q.NewGroup(context.Background())
	var accepted, ran, calls atomic.Int64
	var bad atomic.Value
	var futs sync.Mutex
	var futures []*wq.Future[int]
	var wg sync.WaitGroup
	const perCaller = 2500
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				calls.Add(1)
				switch (c + i) % 3 {
				case 0:
					err := q.Go(func() { ran.Add(1) })
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, wq.ErrDestroyed), errors.Is(err, wq.ErrDraining):
					default:
						bad.Store(err)
					}
				case 1:
					g.Go(func(context.Context) error { return nil })
				default:
					f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 7, nil })
					futs.Lock()
					futures = append(futures, f)
					futs.Unlock()
				}
			}
		}()
	}
	for calls.Load() < 2000 {
		runtime.Gosched()
	}
	q.Destroy()
	wg.Wait()
	if e := bad.Load(); e != nil {
		t.Fatalf("Go racing Destroy = %v", e)
	}
	if a, r := accepted.Load(), ran.Load(); a != r {
		t.Fatalf("%d closures accepted, %d ran", a, r)
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("Group.Wait = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Group.Wait hangs after Destroy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, f := range futures {
		v, err := f.Wait(ctx)
		switch {
		case err == nil && v == 7:
		case errors.Is(err, wq.ErrDestroyed), errors.Is(err, wq.ErrDraining):
		default:
			t.Fatalf("Future.Wait = %d, %v", v, err)
		}
	}
}

// TestGoFlushDrainStorm catches a Flush or Drain that hangs, or an
// accepted closure that never runs, while Go, Group.Go and Submit race
// Flush and Drain storms (Drain refuses outside callers with
// ErrDraining; nothing accepted may be lost).
func TestGoFlushDrainStorm(t *testing.T) {
	q := mustAlloc(t, "go-flush-storm", wq.Unbound, 4)
	var accepted, ran atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, _ := q.NewGroup(context.Background())
				for range 8 {
					if err := q.Go(func() { ran.Add(1) }); err == nil {
						accepted.Add(1)
					} else if !errors.Is(err, wq.ErrDraining) {
						t.Errorf("Go = %v", err)
						return
					}
					g.Go(func(context.Context) error { return nil })
				}
				f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 1, nil })
				if err := g.Wait(); err != nil && !errors.Is(err, wq.ErrDraining) {
					t.Errorf("Group.Wait = %v", err)
					return
				}
				if _, err := f.Wait(context.Background()); err != nil && !errors.Is(err, wq.ErrDraining) {
					t.Errorf("Future.Wait = %v", err)
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%4 == 0 {
					q.Drain()
				} else {
					q.Flush()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("a Flush, Drain, Group.Wait or Future.Wait hangs in the storm")
	}
	q.Flush()
	if a, r := accepted.Load(), ran.Load(); a != r {
		t.Fatalf("%d closures accepted, %d ran", a, r)
	}
}
