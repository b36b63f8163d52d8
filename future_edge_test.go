package wq_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/gowq/wq"
)

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
