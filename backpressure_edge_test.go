package wq_test

import (
	"context"
	"errors"
	"sync"
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

// TestMaxPendingCountReturnsToZeroUnderMixedRace: producers race every
// way in and out of the pending state (Queue, QueueKeyed, QueueContext,
// QueueDelayed and ModDelayed with and without delay, Cancel, CancelSync,
// CancelPending, Go) on a bounded queue; once everything is flushed, the
// MaxPending count, Stats.Pending and the room waiters are all 0. Catches
// a count that drifts on one of those exits.
func TestMaxPendingCountReturnsToZeroUnderMixedRace(t *testing.T) {
	captureErrors(t)
	q := allocBounded(t, "bpe-mixed", wq.Unbound, 2, 8)
	const producers, rounds = 6, 300
	ws := make([]*wq.Work, 16)
	for i := range ws {
		ws[i] = wq.NewWork(func() {})
	}
	dws := make([]*wq.DelayedWork, 8)
	for i := range dws {
		dws[i] = wq.NewDelayedWork(func() {})
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				w := ws[(p*7+i)%len(ws)]
				dw := dws[(p*3+i)%len(dws)]
				switch (p + i) % 11 {
				case 0:
					q.Queue(w)
				case 1:
					q.QueueKeyed(uint64(i%3), w)
				case 2:
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					_ = q.QueueContext(ctx, w)
					cancel()
				case 3:
					q.QueueDelayed(dw, time.Duration(i%3)*100*time.Microsecond)
				case 4:
					q.ModDelayed(dw, 0)
				case 5:
					q.ModDelayed(dw, time.Duration(i%2)*time.Millisecond)
				case 6:
					w.Cancel()
				case 7:
					dw.CancelSync()
				case 8:
					q.CancelPending()
				case 9:
					_ = q.Go(func() {})
				case 10:
					w.CancelSync()
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("producers hang")
	}
	for _, dw := range dws {
		dw.Flush()
	}
	q.Flush()
	if c, s, r := q.PendingCount(), q.Stats().Pending, q.RoomWaiters(); c != 0 || s != 0 || r != 0 {
		t.Errorf("after the race and Flush: count %d, Stats.Pending %d, waiters %d; want 0", c, s, r)
	}
}

// TestQueueContextReturnsOtherQueueRefusal: QueueContext of an item that
// runs now on another queue returns the queue path's refusal (an error
// matching ErrOtherQueue), without reporting it, as documented. Catches
// QueueContext turning every refusal of the queue path into ErrDestroyed
// and reporting it to the error handler.
func TestQueueContextReturnsOtherQueueRefusal(t *testing.T) {
	errs := captureErrors(t)
	q1, err := wq.Alloc("bpe-other1", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Destroy()
	for _, bound := range []int{0, 4} {
		q2 := allocBounded(t, "bpe-other2", wq.Unbound, 1, bound)
		b := newBlocker()
		q1.Queue(b.w)
		b.waitStarted(t)
		before := errs.count(wq.ErrOtherQueue)
		err := q2.QueueContext(context.Background(), b.w)
		if !errors.Is(err, wq.ErrOtherQueue) || errors.Is(err, wq.ErrDestroyed) {
			t.Errorf("MaxPending(%d): QueueContext of an item running on another queue = %v, want ErrOtherQueue", bound, err)
		}
		if n := errs.count(wq.ErrOtherQueue) - before; n != 0 {
			t.Errorf("MaxPending(%d): QueueContext reported its refusal %d times, want 0 (it returns it)", bound, n)
		}
		if b.w.Pending() || q2.PendingCount() != 0 {
			t.Errorf("MaxPending(%d): refused item pending %v, count %d", bound, b.w.Pending(), q2.PendingCount())
		}
		b.free()
		q1.Flush()
	}
}
