package wq_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestCancelPendingEndsGroupAndFuture: a Group function or a Future
// cancelled by CancelPending before it ran ends with ErrCancelled.
// Catches CancelPending not ending one-shot Go items (cancelGoItem), which
// leaves Group.Wait and Future.Wait waiting forever.
func TestCancelPendingEndsGroupAndFuture(t *testing.T) {
	q, err := wq.Alloc("sde-cancel-go", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	g, _ := q.NewGroup(context.Background())
	ran := make(chan struct{}, 10)
	for range 3 {
		g.Go(func(context.Context) error { ran <- struct{}{}; return nil })
	}
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { ran <- struct{}{}; return 1, nil })
	if n := q.CancelPending(); n != 4 {
		t.Fatalf("CancelPending = %d, want 4", n)
	}
	b.free()
	gw := make(chan error, 1)
	go func() { gw <- g.Wait() }()
	select {
	case err := <-gw:
		if !errors.Is(err, wq.ErrCancelled) {
			t.Errorf("Group.Wait = %v, want ErrCancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait did not return after CancelPending cancelled its functions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, wq.ErrCancelled) {
		t.Errorf("Future.Wait = %v, want ErrCancelled", err)
	}
	if len(ran) != 0 {
		t.Errorf("%d cancelled functions ran", len(ran))
	}
}

// TestDestroyGoexitInErrorHandlerReleasesWaiters: an error handler that
// calls runtime.Goexit on the destroy's ErrDelayedPending report ends the
// goroutine that runs the destroy; DestroyContext and a later Destroy
// still return, and the queue is destroyed. Catches a destroy whose done
// channel is closed only on a normal return.
func TestDestroyGoexitInErrorHandlerReleasesWaiters(t *testing.T) {
	q, err := wq.Alloc("sde-goexit", wq.Unbound, 1, wq.WithErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrDelayedPending) {
			runtime.Goexit()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	q.QueueDelayed(wq.NewDelayedWork(func() {}), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.DestroyContext(ctx); err != nil {
		t.Fatalf("DestroyContext = %v, want nil", err)
	}
	done := make(chan struct{})
	go func() { q.Destroy(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a later Destroy waits forever after the handler's Goexit")
	}
	if _, err := q.QueueErr(wq.NewWork(func() {})); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("QueueErr after Destroy = %v, want ErrDestroyed", err)
	}
}
