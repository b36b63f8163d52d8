package wq_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestSubmitValueAndError catches a Future that loses its value or error,
// or whose Done channel does not close.
func TestSubmitValueAndError(t *testing.T) {
	q := mustAlloc(t, "fut", wq.PerCPU, 0)
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 42, nil })
	<-f.Done()
	if v, err := f.Wait(context.Background()); v != 42 || err != nil {
		t.Errorf("Wait = %v, %v; want 42, nil", v, err)
	}
	if v, err := f.Wait(context.Background()); v != 42 || err != nil {
		t.Errorf("second Wait = %v, %v; want 42, nil", v, err)
	}
	bad := errors.New("bad")
	f2 := wq.Submit(q, context.Background(), func(context.Context) (string, error) { return "partial", bad })
	if v, err := f2.Wait(context.Background()); v != "partial" || err != bad {
		t.Errorf("Wait = %q, %v; want partial, bad", v, err)
	}
}

// TestSubmitWaitBoundedByCtx catches a Wait that ignores its own context,
// or a Future that cannot be waited for again after it.
func TestSubmitWaitBoundedByCtx(t *testing.T) {
	q := mustAlloc(t, "fut-ctx", wq.Unbound, 0)
	release := make(chan struct{})
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { <-release; return 1, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if v, err := f.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) || v != 0 {
		t.Errorf("Wait(expiring ctx) = %v, %v; want 0, DeadlineExceeded", v, err)
	}
	close(release)
	if v, err := f.Wait(context.Background()); v != 1 || err != nil {
		t.Errorf("Wait after release = %v, %v; want 1, nil", v, err)
	}
}

// TestSubmitPanicIsPanicError catches a future's panic lost, not readable
// with errors.As, or fatal to the worker.
func TestSubmitPanicIsPanicError(t *testing.T) {
	q := mustAlloc(t, "fut-panic", wq.Unbound, 1)
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { panic("kaboom") })
	_, err := f.Wait(context.Background())
	var pe *wq.PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" || len(pe.Stack) == 0 {
		t.Fatalf("Wait = %v, want a *PanicError with value and stack", err)
	}
	f2 := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 2, nil })
	if v, err := f2.Wait(context.Background()); v != 2 || err != nil {
		t.Errorf("the queue after a future's panic: Wait = %v, %v", v, err)
	}
}

// TestSubmitRefused catches a refused Submit that returns a Future that is
// not done, or done without the reason, or that runs fn anyway.
func TestSubmitRefused(t *testing.T) {
	q, err := wq.Alloc("fut-refused", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context) (int, error) { t.Error("a refused function ran"); return 0, nil }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		f    *wq.Future[int]
		want error
	}{
		{"cancelled ctx", wq.Submit(q, cancelled, fn), context.Canceled},
		{"nil fn", wq.Submit[int](q, context.Background(), nil), wq.ErrNoFunc},
		{"nil ctx", wq.Submit(q, nil, fn), wq.ErrInvalidArgument}, //nolint:staticcheck // the bad input under test
		{"nil queue", wq.Submit(nil, context.Background(), fn), wq.ErrInvalidArgument},
	}
	q.Destroy()
	cases = append(cases, struct {
		name string
		f    *wq.Future[int]
		want error
	}{"destroyed queue", wq.Submit(q, context.Background(), fn), wq.ErrDestroyed})
	for _, c := range cases {
		select {
		case <-c.f.Done():
		default:
			t.Errorf("%s: the Future is not done", c.name)
			continue
		}
		if _, err := c.f.Wait(context.Background()); !errors.Is(err, c.want) {
			t.Errorf("%s: Wait = %v, want %v", c.name, err, c.want)
		}
	}
}

// TestSubmitWaitFromInside catches a future's own function that waits for
// itself forever.
func TestSubmitWaitFromInside(t *testing.T) {
	q := mustAlloc(t, "fut-self", wq.Unbound, 0)
	self := make(chan *wq.Future[error], 1)
	f := wq.Submit(q, context.Background(), func(context.Context) (error, error) {
		me := <-self
		_, err := me.Wait(context.Background())
		return err, nil
	})
	self <- f
	inner, err := f.Wait(context.Background())
	if err != nil || !errors.Is(inner, wq.ErrDeadlock) {
		t.Errorf("Wait from inside = %v (outer %v), want ErrDeadlock", inner, err)
	}
}

// TestFutureGoexitEndsWait catches a Future whose function calls
// runtime.Goexit and that is then never done (Wait hangs).
func TestFutureGoexitEndsWait(t *testing.T) {
	q := mustAlloc(t, "fut-goexit", wq.Unbound, 1)
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { runtime.Goexit(); return 1, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, wq.ErrWorkerExit) {
		t.Fatalf("Future.Wait = %v, want an error matching ErrWorkerExit", err)
	}
	g := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 2, nil })
	if v, err := g.Wait(ctx); v != 2 || err != nil {
		t.Fatalf("a Future after the Goexit = %d, %v", v, err)
	}
}

// TestFutureDoneWinsOverDoneCtx catches a Wait that returns ctx.Err()
// for a Future that was already done when Wait was called.
func TestFutureDoneWinsOverDoneCtx(t *testing.T) {
	q := mustAlloc(t, "fut-done-ctx", wq.Unbound, 0)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for range 200 {
		f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 3, nil })
		<-f.Done()
		if v, err := f.Wait(done); v != 3 || err != nil {
			t.Fatalf("Wait(cancelled ctx) of a done Future = %d, %v, want 3, nil", v, err)
		}
	}
}

// TestFutureWaitFromOwnFunctionAfterThreadMove catches a Future.Wait
// called from inside the future's own function that waits forever instead
// of returning ErrDeadlock because the function unlocked the worker's
// goroutine and it moved to another thread.
func TestFutureWaitFromOwnFunctionAfterThreadMove(t *testing.T) {
	for _, b := range []struct {
		name string
		opts []wq.Option
	}{{"default", nil}, {"threads", []wq.Option{wq.Threads()}}} {
		t.Run(b.name, func(t *testing.T) {
			q, err := wq.Alloc("fut-wait-moved", wq.Unbound, 0, b.opts...)
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			moved := make(chan bool, 1)
			var f *wq.Future[int]
			ready := make(chan struct{})
			f = wq.Submit(q, context.Background(), func(context.Context) (int, error) {
				<-ready
				m := wq.MoveOffThread()
				moved <- m
				if m {
					_, err := f.Wait(context.Background())
					res <- err
				}
				return 1, nil
			})
			close(ready)
			if !<-moved {
				q.Destroy()
				t.Skip("the work function's goroutine did not move to another thread")
			}
			select {
			case err := <-res:
				if !errors.Is(err, wq.ErrDeadlock) {
					t.Errorf("Future.Wait from its own function = %v, want ErrDeadlock", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Future.Wait from inside its own function (moved off the worker's thread) waits forever")
			}
			q.Destroy()
		})
	}
}

// BenchmarkSubmit measures Submit and its allocations (the Future and its
// channel).
func BenchmarkSubmit(b *testing.B) {
	q, err := wq.Alloc("bench-submit", wq.Unbound, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 1, nil }
	benchGoCalls(b, q, func() error { _ = wq.Submit(q, ctx, fn); return nil })
}
