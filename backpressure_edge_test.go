package wq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestQueueContextRefusalDuringDestroyMatchesQueueErr: while Destroy
// drains, QueueContext is refused with an error that matches ErrDestroyed
// (and ErrDraining), as QueueErr's is, both for a waiter woken by the
// destroy and for a call made after it began. Catches QueueContext
// returning a bare ErrDraining there.
func TestQueueContextRefusalDuringDestroyMatchesQueueErr(t *testing.T) {
	q, err := wq.Alloc("bpe-destroy", wq.Unbound, 1, wq.MaxPending(1))
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	q.Queue(wq.NewWork(func() {})) // the one pending slot
	waiter := make(chan error, 1)
	go func() { waiter <- q.QueueContext(context.Background(), wq.NewWork(func() {})) }()
	for q.RoomWaiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("DestroyContext = %v, want context.Canceled (the blocker holds the drain)", err)
	}
	select {
	case err := <-waiter:
		if !errors.Is(err, wq.ErrDestroyed) || !errors.Is(err, wq.ErrDraining) {
			t.Errorf("woken QueueContext = %v, want an error matching ErrDestroyed and ErrDraining", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("QueueContext was not woken by the destroy")
	}
	_, qerr := q.QueueErr(wq.NewWork(func() {}))
	cerr := q.QueueContext(context.Background(), wq.NewWork(func() {}))
	if !errors.Is(qerr, wq.ErrDestroyed) {
		t.Fatalf("QueueErr = %v, want ErrDestroyed", qerr)
	}
	if !errors.Is(cerr, wq.ErrDestroyed) || !errors.Is(cerr, wq.ErrDraining) {
		t.Errorf("QueueContext = %v, want an error matching ErrDestroyed and ErrDraining, as QueueErr's %v", cerr, qerr)
	}
	b.free()
	q.Destroy()
}
