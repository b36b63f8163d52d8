package wq_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// TestGroupFirstErrorCancels catches a Wait that returns a later error
// than the first, or a first error that does not cancel the context.
func TestGroupFirstErrorCancels(t *testing.T) {
	q := mustAlloc(t, "grp-err", wq.Unbound, 0)
	g, ctx := q.NewGroup(context.Background())
	first := errors.New("first")
	g.Go(func(context.Context) error { return first })
	<-ctx.Done() // the first error cancels
	g.Go(func(context.Context) error { return errors.New("second") })
	g.Go(func(context.Context) error { return nil })
	if err := g.Wait(); err != first {
		t.Errorf("Wait = %v, want the first error", err)
	}
	if c := context.Cause(ctx); c != first {
		t.Errorf("context.Cause = %v, want the first error", c)
	}
}

// TestGroupWaitNilCancelsContext catches a group context left alive after
// Wait, as errgroup cancels it.
func TestGroupWaitNilCancelsContext(t *testing.T) {
	q := mustAlloc(t, "grp-nil", wq.PerCPU, 0)
	g, ctx := q.NewGroup(context.Background())
	var n atomic.Int32
	for range 100 {
		g.Go(func(ctx context.Context) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			n.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait = %v", err)
	}
	if n.Load() != 100 {
		t.Errorf("%d functions ran before Wait returned, want 100", n.Load())
	}
	if ctx.Err() == nil {
		t.Error("the group context is not cancelled after Wait")
	}
}

// TestGroupWaitsForOwnFunctionsOnly catches a Wait that waits for other
// items of the queue (Workqueue.Flush semantics instead of the group's).
func TestGroupWaitsForOwnFunctionsOnly(t *testing.T) {
	q := mustAlloc(t, "grp-own", wq.Unbound, 0)
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{})
	if err := q.Go(func() { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	g, _ := q.NewGroup(context.Background())
	g.Go(func(context.Context) error { return nil })
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait is waiting for an item outside the group")
	}
}

// TestGroupPanicIsPanicError catches a group panic lost, returned as
// something errors.As cannot read, killing the worker, or not cancelling
// the context.
func TestGroupPanicIsPanicError(t *testing.T) {
	handled := make(chan wq.PanicInfo, 1)
	q, err := wq.Alloc("grp-panic", wq.Unbound, 1, wq.WithPanicHandler(func(pi wq.PanicInfo) { handled <- pi }))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	g, ctx := q.NewGroup(context.Background())
	sentinel := errors.New("as error")
	g.Go(func(context.Context) error { panic(sentinel) })
	<-ctx.Done()
	err = g.Wait()
	var pe *wq.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Wait = %v (%T), want a *PanicError", err, err)
	}
	if pe.Value != sentinel || !errors.Is(err, sentinel) {
		t.Errorf("PanicError.Value = %v; errors.Is(err, value) = %v", pe.Value, errors.Is(err, sentinel))
	}
	if !strings.Contains(string(pe.Stack), "TestGroupPanicIsPanicError") {
		t.Errorf("PanicError.Stack does not show the panicking function:\n%s", pe.Stack)
	}
	select {
	case pi := <-handled:
		t.Errorf("a group panic went to the panic handler too: %v", pi)
	default:
	}
	if n := q.Stats().Panics; n != 1 {
		t.Errorf("Stats().Panics = %d, want 1", n)
	}
	// The worker lives: the queue (max_active 1) runs the next item.
	var ran atomic.Bool
	if err := q.Go(func() { ran.Store(true) }); err != nil {
		t.Fatal(err)
	}
	q.Flush()
	if !ran.Load() {
		t.Error("the queue ran nothing after a group panic")
	}
}

// TestGroupLimit catches more functions admitted at once than the limit.
func TestGroupLimit(t *testing.T) {
	q := mustAlloc(t, "grp-limit", wq.Unbound, 0)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(2)
	var cur, peak atomic.Int32
	for range 50 {
		g.Go(func(context.Context) error {
			c := cur.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			time.Sleep(100 * time.Microsecond)
			cur.Add(-1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("%d functions ran at once with SetLimit(2)", p)
	}
}

// TestGroupSetLimitZero catches SetLimit(0) admitting a function, or a Go
// that stays blocked after the limit is raised.
func TestGroupSetLimitZero(t *testing.T) {
	q := mustAlloc(t, "grp-zero", wq.Unbound, 0)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(0)
	if g.TryGo(func(context.Context) error { return nil }) {
		t.Fatal("TryGo admitted a function with SetLimit(0)")
	}
	var ran atomic.Bool
	returned := make(chan struct{})
	go func() {
		g.Go(func(context.Context) error { ran.Store(true); return nil })
		close(returned)
	}()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-returned:
		t.Fatal("Go returned with SetLimit(0)")
	default:
	}
	if ran.Load() {
		t.Fatal("a function ran with SetLimit(0)")
	}
	g.SetLimit(-1) // negative: no limit; wakes the blocked Go
	<-returned
	if err := g.Wait(); err != nil || !ran.Load() {
		t.Errorf("Wait = %v, ran = %v; want nil, true", err, ran.Load())
	}
}

// TestGroupGoFromInside catches a deadlock (or a lost function) when a
// group function calls Go on its own group within the limit.
func TestGroupGoFromInside(t *testing.T) {
	for _, fl := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q := mustAlloc(t, "grp-inside", fl, 1)
		g, _ := q.NewGroup(context.Background())
		g.SetLimit(2)
		var inner atomic.Int32
		g.Go(func(context.Context) error {
			g.Go(func(context.Context) error { inner.Add(1); return nil })
			return nil
		})
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err := <-done:
			if err != nil || inner.Load() != 1 {
				t.Errorf("%v: Wait = %v, inner ran %d times; want nil, 1", fl, err, inner.Load())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: Go from inside a group function deadlocked", fl)
		}
	}
}

// TestGroupWaitFromInside catches a Wait from a group's own function that
// waits for itself forever.
func TestGroupWaitFromInside(t *testing.T) {
	q := mustAlloc(t, "grp-wait-in", wq.Unbound, 0)
	g, _ := q.NewGroup(context.Background())
	var inner error
	g.Go(func(context.Context) error { inner = g.Wait(); return nil })
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(inner, wq.ErrDeadlock) {
		t.Errorf("Wait from inside = %v, want ErrDeadlock", inner)
	}
}

// TestGroupDestroyDuringWait catches a Wait that hangs, or functions lost,
// when the queue is destroyed while Wait waits, and a later Go not counted
// as ErrDestroyed.
func TestGroupDestroyDuringWait(t *testing.T) {
	q, err := wq.Alloc("grp-destroy", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := q.NewGroup(context.Background())
	release := make(chan struct{})
	var ran atomic.Int32
	for range 8 {
		g.Go(func(context.Context) error { <-release; ran.Add(1); return nil })
	}
	waited := make(chan error, 1)
	go func() { waited <- g.Wait() }()
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	time.Sleep(5 * time.Millisecond)
	close(release)
	<-destroyed
	if err := <-waited; err != nil {
		t.Errorf("Wait = %v, want nil (every function ran)", err)
	}
	if ran.Load() != 8 {
		t.Errorf("%d of 8 functions ran", ran.Load())
	}
	g2, ctx := q.NewGroup(context.Background())
	g2.Go(func(context.Context) error { t.Error("a function ran on a destroyed queue"); return nil })
	if err := g2.Wait(); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("Wait after Go on a destroyed queue = %v, want ErrDestroyed", err)
	}
	if !errors.Is(context.Cause(ctx), wq.ErrDestroyed) {
		t.Errorf("context.Cause = %v, want ErrDestroyed", context.Cause(ctx))
	}
}

// TestGroupBadInput catches a zero Group or a nil fn that panics or hangs
// instead of giving an error.
func TestGroupBadInput(t *testing.T) {
	var zero wq.Group
	zero.Go(func(context.Context) error { return nil })
	if zero.TryGo(func(context.Context) error { return nil }) {
		t.Error("TryGo on a zero Group = true")
	}
	zero.SetLimit(1)
	if err := zero.Wait(); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("zero Group Wait = %v, want ErrInvalidArgument", err)
	}
	q := mustAlloc(t, "grp-bad", wq.Unbound, 0)
	g, _ := q.NewGroup(nil) //nolint:staticcheck // nil ctx is the bad input under test
	g.Go(nil)
	if err := g.Wait(); !errors.Is(err, wq.ErrNoFunc) {
		t.Errorf("Wait after Go(nil) = %v, want ErrNoFunc", err)
	}
}

// TestGroupCancelledParent catches functions skipped when the parent
// context is already cancelled: they run and see it, as with errgroup.
func TestGroupCancelledParent(t *testing.T) {
	q := mustAlloc(t, "grp-cancelled", wq.Unbound, 0)
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	g, _ := q.NewGroup(parent)
	var saw atomic.Int32
	for range 4 {
		g.Go(func(ctx context.Context) error {
			if ctx.Err() != nil {
				saw.Add(1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if saw.Load() != 4 {
		t.Errorf("%d of 4 functions ran and saw the cancelled context", saw.Load())
	}
}

// TestGroupConcurrentGo catches lost admissions when many goroutines call
// Go on one group at once, racing Wait's counter.
func TestGroupConcurrentGo(t *testing.T) {
	q := mustAlloc(t, "grp-conc", wq.Unbound, 0)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(4)
	var n atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				g.Go(func(context.Context) error { n.Add(1); return nil })
			}
		}()
	}
	wg.Wait()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 800 {
		t.Errorf("%d of 800 functions ran", n.Load())
	}
}

// queueGoexitTracer calls runtime.Goexit on the first QueueWork event of the
// queue named q (on the queuing goroutine), and passes every other event.
type queueGoexitTracer struct {
	q    string
	once atomic.Bool
}

func (t *queueGoexitTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind == wqtrace.QueueWork && ev.Workqueue == t.q && t.once.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
}

// TestGroupWaitReturnsAfterTracerGoexitInGo catches a Group.Wait that
// hangs forever when the goroutine calling Group.Go ends inside the
// tracer's queue_work (runtime.Goexit): the item is released idle but the
// group still counts the function as admitted.
func TestGroupWaitReturnsAfterTracerGoexitInGo(t *testing.T) {
	q := mustAlloc(t, "grp-tr-goexit", wq.Unbound, 0)
	wq.SetTracer(&queueGoexitTracer{q: "grp-tr-goexit"})
	defer wq.SetTracer(nil)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		g.Go(func(context.Context) error { t.Error("a function whose queueing was cut short ran"); return nil })
	}()
	<-exited
	wq.SetTracer(nil)
	// The limit's slot must be free again: TryGo is admitted.
	ran := make(chan struct{})
	if !g.TryGo(func(context.Context) error { close(ran); return nil }) {
		t.Error("TryGo refused: the slot of the cut-short Go is still held")
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, wq.ErrCancelled) {
			t.Errorf("Wait = %v, want an error matching ErrCancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait hangs after the Go caller exited in the tracer")
	}
}

// TestGroupGoexitInFunctionEndsWait catches a runtime.Goexit in a group
// function that leaves Wait hanging or the queue without a worker.
func TestGroupGoexitInFunctionEndsWait(t *testing.T) {
	q := mustAlloc(t, "grp-fn-goexit", wq.Unbound, 1)
	g, _ := q.NewGroup(context.Background())
	for range 3 {
		g.Go(func(context.Context) error { runtime.Goexit(); return nil })
	}
	var ran atomic.Int32
	g.Go(func(context.Context) error { ran.Add(1); return nil })
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, wq.ErrWorkerExit) {
			t.Errorf("Wait = %v, want an error matching ErrWorkerExit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait hangs after runtime.Goexit in a function")
	}
	if ran.Load() != 1 {
		t.Errorf("the function after the Goexits ran %d times, want 1", ran.Load())
	}
	// The queue still serves.
	ok := make(chan struct{})
	if err := q.Go(func() { close(ok) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ok:
	case <-time.After(30 * time.Second):
		t.Fatal("the queue no longer runs items after Goexits in group functions")
	}
}

// TestGroupLimitStormAdmitsEveryWaiter catches a lost wake-up in Go's
// limit wait: SetLimit changing under waiting Go calls (0, 1, 3, none)
// while functions finish must leave no Go waiting forever.
func TestGroupLimitStormAdmitsEveryWaiter(t *testing.T) {
	q := mustAlloc(t, "grp-limit-storm", wq.Unbound, 0)
	for round := range 20 {
		g, _ := q.NewGroup(context.Background())
		g.SetLimit(1)
		var ran atomic.Int64
		var callers sync.WaitGroup
		const n = 64
		for range n {
			callers.Add(1)
			go func() {
				defer callers.Done()
				g.Go(func(context.Context) error { ran.Add(1); runtime.Gosched(); return nil })
			}()
		}
		stop := make(chan struct{})
		storm := make(chan struct{})
		go func() {
			defer close(storm)
			limits := []int{0, 1, 3, 2, 0, 1}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				g.SetLimit(limits[i%len(limits)])
				runtime.Gosched()
			}
		}()
		time.Sleep(time.Millisecond)
		close(stop)
		<-storm
		g.SetLimit(2) // a final limit above zero: every waiter must get in
		finished := make(chan struct{})
		go func() { callers.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: Go calls still waiting at the limit after SetLimit(2); %d of %d ran", round, ran.Load(), n)
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		if ran.Load() != n {
			t.Fatalf("round %d: %d functions ran, want %d", round, ran.Load(), n)
		}
	}
}

// TestGroupDestroyWhileWaitWithInnerGo catches a Wait that hangs, or a
// function admitted and never run nor refused, when Destroy drains the
// queue while group functions Go more functions (chained, accepted) and
// outside callers Go too (refused once Destroy began).
func TestGroupDestroyWhileWaitWithInnerGo(t *testing.T) {
	for round := range 5 {
		q, err := wq.Alloc("grp-destroy-inner", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := q.NewGroup(context.Background())
		var admitted, ran, refused atomic.Int64
		var fn func(depth int) func(context.Context) error
		fn = func(depth int) func(context.Context) error {
			return func(context.Context) error {
				ran.Add(1)
				if depth < 6 {
					admitted.Add(2)
					g.Go(fn(depth + 1))
					g.Go(fn(depth + 1))
				}
				return nil
			}
		}
		var outside sync.WaitGroup
		stop := make(chan struct{})
		for range 4 {
			outside.Add(1)
			go func() {
				defer outside.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					admitted.Add(1)
					g.Go(func(context.Context) error { ran.Add(1); return nil })
				}
			}()
		}
		admitted.Add(1)
		g.Go(fn(0))
		time.Sleep(time.Duration(round+1) * time.Millisecond)
		destroyed := make(chan struct{})
		go func() { q.Destroy(); close(destroyed) }()
		time.Sleep(time.Millisecond)
		close(stop)
		outside.Wait()
		done := make(chan error, 1)
		go func() { done <- g.Wait() }()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, wq.ErrDestroyed) {
				t.Fatalf("Wait = %v, want nil or ErrDestroyed", err)
			}
			if err != nil {
				refused.Add(1)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: Group.Wait hangs while Destroy drains: admitted %d, ran %d", round, admitted.Load(), ran.Load())
		}
		<-destroyed
		if ran.Load() > admitted.Load() {
			t.Fatalf("round %d: %d ran, only %d admitted", round, ran.Load(), admitted.Load())
		}
	}
}

// TestGroupInnerGoAtLimitOnPerCPUQueue catches a Go from inside a group
// function that waits at the limit forever on a per-CPU queue because
// concurrency management keeps counting the waiting worker as running and
// never starts the function that would free the slot (the kernel's
// wq_worker_sleeping).
func TestGroupInnerGoAtLimitOnPerCPUQueue(t *testing.T) {
	q := mustAlloc(t, "grp-inner-percpu", wq.PerCPU, 0)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(2)
	var ran atomic.Int32
	g.Go(func(context.Context) error {
		for range 4 {
			// The second of these waits for the first to return: it
			// was queued on this CPU's pool, behind this worker.
			g.Go(func(context.Context) error { ran.Add(1); return nil })
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Group.Go at the limit inside a per-CPU group function waits forever; %d of 4 ran", ran.Load())
	}
	if ran.Load() != 4 {
		t.Fatalf("%d of 4 ran", ran.Load())
	}
}

// TestGroupWaitFromOwnFunctionAfterThreadMove catches a Group.Wait called
// from inside one of the group's functions that waits forever instead of
// returning ErrDeadlock because the function unlocked the worker's
// goroutine and it moved to another thread, where a by-thread self check
// finds no worker.
func TestGroupWaitFromOwnFunctionAfterThreadMove(t *testing.T) {
	for _, b := range []struct {
		name string
		opts []wq.Option
	}{{"default", nil}, {"threads", []wq.Option{wq.Threads()}}} {
		t.Run(b.name, func(t *testing.T) {
			q, err := wq.Alloc("grp-wait-moved", wq.Unbound, 0, b.opts...)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := q.NewGroup(context.Background())
			res := make(chan error, 1)
			moved := make(chan bool, 1)
			g.Go(func(context.Context) error {
				m := wq.MoveOffThread()
				moved <- m
				if m {
					res <- g.Wait()
				}
				return nil
			})
			if !<-moved {
				q.Destroy()
				t.Skip("the work function's goroutine did not move to another thread")
			}
			select {
			case err := <-res:
				if !errors.Is(err, wq.ErrDeadlock) {
					t.Errorf("Group.Wait from its own function = %v, want ErrDeadlock", err)
				}
			case <-time.After(10 * time.Second):
				// The function waits for itself forever: q cannot be destroyed.
				t.Fatal("Group.Wait from inside its own function (moved off the worker's thread) waits forever")
			}
			if err := g.Wait(); err != nil {
				t.Error(err)
			}
			q.Destroy()
		})
	}
}

// TestGoAPIFunctionsThatLeaveTheWorkerThread catches a Group.Wait or
// Future.Wait that hangs, a closure that runs twice, or a queue left
// without workers, when Go, Group and Submit functions unlock the worker's
// goroutine from its thread and move off it (the worker is then retired
// and its item finished on the exit path, which recycles the Go item).
func TestGoAPIFunctionsThatLeaveTheWorkerThread(t *testing.T) {
	q := mustAlloc(t, "goapi-leave-thread", wq.Unbound, 2)
	var ran atomic.Int32
	g, _ := q.NewGroup(context.Background())
	for range 3 {
		g.Go(func(context.Context) error { wq.MoveOffThread(); ran.Add(1); return nil })
	}
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { wq.MoveOffThread(); ran.Add(1); return 5, nil })
	if err := q.Go(func() { wq.MoveOffThread(); ran.Add(1) }); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait hangs after functions left the worker's thread")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if v, err := f.Wait(ctx); v != 5 || err != nil {
		t.Fatalf("Future.Wait = %d, %v", v, err)
	}
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(30 * time.Second):
		t.Fatal("Flush hangs after functions left the worker's thread")
	}
	if ran.Load() != 5 {
		t.Fatalf("%d of 5 functions ran", ran.Load())
	}
	for range 20 { // the retired workers were replaced
		if err := q.Go(func() { ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	q.Flush()
	if ran.Load() != 25 {
		t.Fatalf("%d of 25 functions ran", ran.Load())
	}
}

// TestTryGoRefusedByFullQueueReturnsFalse: TryGo on a queue that refuses
// the function (full under MaxPending) returns false, runs nothing and
// records no error: the group's context stays live and Wait returns nil.
// Fault caught: TryGo returned true for a refused function and the
// refusal cancelled the whole group.
func TestTryGoRefusedByFullQueueReturnsFalse(t *testing.T) {
	q, err := wq.Alloc("trygo-full", wq.Unbound, 1, wq.WithMaxPending(1))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	block, started := make(chan struct{}), make(chan struct{})
	if err := q.Go(func() { close(started); <-block }); err != nil {
		t.Fatal(err)
	}
	<-started
	g, ctx := q.NewGroup(context.Background())
	var ran atomic.Int32
	if !g.TryGo(func(context.Context) error { ran.Add(1); return nil }) {
		t.Fatal("TryGo with room = false")
	}
	if g.TryGo(func(context.Context) error { ran.Add(1); return nil }) {
		t.Error("TryGo on a full queue = true, want false")
	}
	if ctx.Err() != nil {
		t.Errorf("a refused TryGo cancelled the group's context: %v", context.Cause(ctx))
	}
	close(block)
	if err := g.Wait(); err != nil {
		t.Errorf("Wait = %v, want nil", err)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("%d functions ran, want 1", n)
	}
}

// BenchmarkGroupRound measures one errgroup round from an ordinary
// goroutine: NewGroup, two Go of an empty function and a Wait that blocks
// (the self-wait check of a Wait that blocks is on this path), on a
// goroutine-backed queue and on a Threads() queue.
func BenchmarkGroupRound(b *testing.B) {
	for _, bk := range []struct {
		name string
		opts []wq.Option
	}{{"default", nil}, {"threads", []wq.Option{wq.Threads()}}} {
		b.Run(bk.name, func(b *testing.B) {
			q, err := wq.Alloc("bench-group-round", wq.Unbound, 0, bk.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			ctx := context.Background()
			nop := func(context.Context) error { return nil }
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				g, _ := q.NewGroup(ctx)
				g.Go(nop)
				g.Go(nop)
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A Group function's panic is counted in Stats().Panics also after the
// function moved the worker's goroutine off its thread (the count went to
// no queue: the by-thread lookup found no worker).
func TestGroupPanicCountedAfterThreadMove(t *testing.T) {
	q := mustAlloc(t, "grp-panic-moved", wq.Unbound, 0, wq.Threads())
	for attempt := 0; ; attempt++ {
		before := q.Stats().Panics
		var moved atomic.Bool
		g, _ := q.NewGroup(context.Background())
		g.Go(func(context.Context) error {
			moved.Store(wq.MoveOffThread())
			panic("boom after the move")
		})
		var pe *wq.PanicError
		if err := g.Wait(); !errors.As(err, &pe) {
			t.Fatalf("Group.Wait = %v, want a *PanicError", err)
		}
		if !moved.Load() {
			if attempt < 5 {
				continue
			}
			t.Skip("the function's goroutine did not move to another thread")
		}
		if got := q.Stats().Panics - before; got != 1 {
			t.Errorf("Stats().Panics grew by %d for one panic after the move, want 1", got)
		}
		return
	}
}

// BenchmarkGroupGo measures Group.Go (no limit) and its allocations.
func BenchmarkGroupGo(b *testing.B) {
	q, err := wq.Alloc("bench-group", wq.Unbound, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	g, _ := q.NewGroup(context.Background())
	fn := func(context.Context) error { return nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%goBenchChunk == 0 && i > 0 {
			b.StopTimer()
			_ = g.Wait()
			g, _ = q.NewGroup(context.Background())
			b.StartTimer()
		}
		g.Go(fn)
	}
	b.StopTimer()
	_ = g.Wait()
}

// TestGroupWaitFromTracerQueueWorkIsDeadlock: the tracer's queue_work for
// a group's function runs on the goroutine calling Group.Go, with the item
// in transit (not linked yet): a Group.Wait there would wait for that
// item, which only this goroutine can move on. It returns an error
// matching ErrDeadlock at once, as Work.Flush of an item in transit does,
// and the function then runs.
func TestGroupWaitFromTracerQueueWorkIsDeadlock(t *testing.T) {
	q, err := wq.Alloc("grp-tr-wait", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := q.NewGroup(context.Background())
	var once atomic.Bool
	waitErr := make(chan error, 1)
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.QueueWork && ev.Workqueue == "grp-tr-wait" && once.CompareAndSwap(false, true) {
			waitErr <- g.Wait()
		}
	}))
	defer wq.SetTracer(nil)
	ran := make(chan struct{})
	mustReturn(t, "Group.Go whose tracer's queue_work calls Group.Wait", func() {
		g.Go(func(context.Context) error { close(ran); return nil })
	})
	wq.SetTracer(nil)
	if err := <-waitErr; !errors.Is(err, wq.ErrDeadlock) {
		t.Errorf("Group.Wait from queue_work = %v, want an error matching ErrDeadlock", err)
	}
	waitChan(t, "the group's function", ran)
	if err := g.Wait(); err != nil {
		t.Errorf("Group.Wait after = %v, want nil", err)
	}
	q.Destroy()
}

// TestGroupWaitFromTracerNestedQueueIsDeadlock: the tracer's queue_work
// for a group's function may itself queue an item (traced in turn, on
// the same goroutine), and call Group.Wait after that queue returns
// ("after") or from the nested item's own queue_work ("inside"). The
// group's item is still in transit on this goroutine either way: Wait
// must return an error matching ErrDeadlock, not wait for an item that
// only this goroutine can move on. Catches a transit record per
// goroutine that a nested queue_work overwrites or clears on its way out.
func TestGroupWaitFromTracerNestedQueueIsDeadlock(t *testing.T) {
	for _, when := range []string{"after", "inside"} {
		t.Run(when, func(t *testing.T) {
			name := "grp-tr-nested-" + when
			q, err := wq.Alloc(name, wq.Unbound, 0)
			if err != nil {
				t.Fatal(err)
			}
			g, _ := q.NewGroup(context.Background())
			other := wq.NewWork(func() {})
			var events atomic.Int32
			waitErr := make(chan error, 1)
			wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
				if ev.Kind != wqtrace.QueueWork || ev.Workqueue != name {
					return
				}
				switch n := events.Add(1); {
				case n == 1: // the group's item
					q.Queue(other) // a nested queue_work on this goroutine
					if when == "after" {
						waitErr <- g.Wait()
					}
				case n == 2 && when == "inside": // other's, nested
					waitErr <- g.Wait()
				}
			}))
			defer wq.SetTracer(nil)
			ran := make(chan struct{})
			mustReturn(t, "Group.Go whose tracer's queue_work queues an item and calls Group.Wait "+when, func() {
				g.Go(func(context.Context) error { close(ran); return nil })
			})
			wq.SetTracer(nil)
			if err := <-waitErr; !errors.Is(err, wq.ErrDeadlock) {
				t.Errorf("Group.Wait from queue_work, %s a nested queue = %v, want an error matching ErrDeadlock", when, err)
			}
			waitChan(t, "the group's function", ran)
			if err := g.Wait(); err != nil {
				t.Errorf("Group.Wait after = %v, want nil", err)
			}
			other.Flush()
			q.Destroy()
		})
	}
}
