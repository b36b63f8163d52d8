package wq_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

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

// moveOffWorkerThread, called from a work function, unlocks the worker's
// goroutine from its thread (every LockOSThread level the worker holds)
// and blocks until the goroutine runs on another thread: a helper
// goroutine locks the old thread while this one sleeps. It reports
// whether the goroutine moved. The worker is retired after the item
// (its thread was lost), as for any work function that does this.
func moveOffWorkerThread() bool {
	old := syscall.Gettid()
	for range 200 {
		runtime.UnlockOSThread()
	}
	for range 200 {
		release := make(chan struct{})
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			<-release
			runtime.UnlockOSThread()
		}()
		time.Sleep(50 * time.Microsecond)
		moved := syscall.Gettid() != old
		<-locked
		close(release)
		if moved {
			return true
		}
	}
	return false
}

// TestGroupWaitFromOwnFunctionAfterThreadMove catches a Group.Wait called
// from inside one of the group's functions that waits forever instead of
// returning ErrDeadlock because the function unlocked the worker's
// goroutine and it moved to another thread, where a by-thread self check
// finds no worker.
func TestGroupWaitFromOwnFunctionAfterThreadMove(t *testing.T) {
	t.Skip("known limitation, not fixed: the self check finds the worker by its thread; finding it by goroutine id costs about 2 us on every Wait that blocks (docs/decisions.md, \"Self-wait after the goroutine moved\")")
	q, err := wq.Alloc("grp-wait-moved", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := q.NewGroup(context.Background())
	res := make(chan error, 1)
	moved := make(chan bool, 1)
	g.Go(func(context.Context) error {
		m := moveOffWorkerThread()
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
		g.Go(func(context.Context) error { moveOffWorkerThread(); ran.Add(1); return nil })
	}
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { moveOffWorkerThread(); ran.Add(1); return 5, nil })
	if err := q.Go(func() { moveOffWorkerThread(); ran.Add(1) }); err != nil {
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
	q, err := wq.Alloc("trygo-full", wq.Unbound, 1, wq.MaxPending(1))
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
