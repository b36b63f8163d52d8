package wq_test

import (
	"context"
	"errors"
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
