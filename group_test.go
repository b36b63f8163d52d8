package wq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
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
