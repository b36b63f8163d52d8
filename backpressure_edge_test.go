package wq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
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

// holdEnd is a tracer that holds the worker in execute_end of one work
// function until released: the item has finished (its flush waiters are
// released) and its max_active slot is not freed yet.
type holdEnd struct {
	fn      string
	reached chan struct{}
	release chan struct{}
}

func (h *holdEnd) Trace(ev *wqtrace.Event) {
	if ev.Kind == wqtrace.ExecuteEnd && ev.Function == h.fn {
		close(h.reached)
		<-h.release
	}
}

func finishedItem() {}

// TestStatsPendingExcludesFinishedItem: once an item has finished (its
// Flush returned), Stats.Pending does not count it as waiting while its
// worker is still to free its max_active slot. Catches Pending computed
// from the completion counter (bumped before the flush waiters are
// released) against nrActive (dropped later, in afterItem): a phantom
// pending item after Flush, also after a workqueue Flush of keyed items,
// whose chain colors end at completion.
func TestStatsPendingExcludesFinishedItem(t *testing.T) {
	q := allocBounded(t, "bpe-finished", wq.Unbound, 2, 4)
	w := wq.NewWork(finishedItem)
	h := &holdEnd{fn: w.Func(), reached: make(chan struct{}), release: make(chan struct{})}
	wq.SetTracer(h)
	released := false
	free := func() {
		if !released {
			released = true
			close(h.release)
		}
	}
	defer wq.SetTracer(nil)
	defer free()
	if !q.Queue(w) {
		t.Fatal("Queue = false")
	}
	select {
	case <-h.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("execute_end not traced")
	}
	w.Flush()
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 {
		t.Errorf("finished item (Flush returned): Stats.Pending = %d, count = %d; want 0, 0", s.Pending, q.PendingCount())
	}
	free()
	wq.SetTracer(nil)
	q.Flush()
	if s := q.Stats(); s.Pending != 0 {
		t.Errorf("after Flush: Stats.Pending = %d", s.Pending)
	}
}
