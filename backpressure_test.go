package wq_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

func TestMaxPendingNegativeIsRejected(t *testing.T) {
	// Catches a negative bound silently taken as unbounded (or as full).
	if _, err := wq.Alloc("bp-neg", wq.Unbound, 1, wq.WithMaxPending(-1)); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Fatalf("Alloc(WithMaxPending(-1)) err = %v, want ErrInvalidArgument", err)
	}
}

// TestMaxPendingRefusesBeyondBound is the example: max_active 1,
// one item running, 1000 queued; only the first MaxPending wait, the rest
// are refused with ErrQueueFull, and every accepted item runs.
func TestMaxPendingRefusesBeyondBound(t *testing.T) {
	// Catches an unbounded Queue, a refused item left pending, or a count
	// that does not return to 0.
	errs := captureErrors(t)
	const bound = 10
	q := allocBounded(t, "bp-1000", wq.Unbound, 1, bound)
	b := newBlocker()
	defer b.free()
	if !q.Queue(b.w) {
		t.Fatal("Queue(blocker) = false")
	}
	b.waitStarted(t)
	var ran atomic.Int64
	items := make([]*wq.Work, 1000)
	accepted := 0
	for i := range items {
		items[i] = wq.NewWork(func() { ran.Add(1) })
		if q.Queue(items[i]) {
			accepted++
		} else if items[i].Pending() {
			t.Fatalf("refused item %d left pending", i)
		}
	}
	if accepted != bound {
		t.Fatalf("accepted %d items, want %d", accepted, bound)
	}
	if n := errs.count(wq.ErrQueueFull); n != 1 {
		t.Errorf("ErrQueueFull reported %d times, want 1 (once until the count falls)", n)
	}
	if s := q.Stats(); s.Pending != bound || s.MaxPending != bound {
		t.Errorf("Stats Pending=%d MaxPending=%d, want %d, %d", s.Pending, s.MaxPending, bound, bound)
	}
	if c := q.PendingCount(); c != bound {
		t.Errorf("count = %d, want %d", c, bound)
	}
	b.free()
	q.Flush()
	if ran.Load() != bound {
		t.Errorf("ran %d items, want %d", ran.Load(), bound)
	}
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 {
		t.Errorf("after Flush: Stats.Pending = %d, count = %d; want 0", s.Pending, q.PendingCount())
	}
	// Room again: the queue accepts, and a new full episode reports again.
	if !q.Queue(items[bound]) {
		t.Error("Queue after the backlog drained = false")
	}
	q.Flush()
}

// TestMaxPendingCountsKeyedChains: items waiting in a key's chain count.
func TestMaxPendingCountsKeyedChains(t *testing.T) {
	// Catches chained keyed items outside the bound (a key's chain would
	// grow without limit).
	errs := captureErrors(t)
	const bound = 5
	q := allocBounded(t, "bp-keyed", wq.Unbound, 4, bound)
	b := newBlocker()
	defer b.free()
	if !q.QueueKeyed(1, b.w) {
		t.Fatal("QueueKeyed(blocker) = false")
	}
	b.waitStarted(t)
	var ran atomic.Int64
	var order []int
	var mu sync.Mutex
	for i := 0; i < bound; i++ {
		i := i
		if !q.QueueKeyed(1, wq.NewWork(func() { ran.Add(1); mu.Lock(); order = append(order, i); mu.Unlock() })) {
			t.Fatalf("QueueKeyed %d refused below the bound", i)
		}
	}
	if s := q.Stats(); s.Pending != bound {
		t.Errorf("Stats.Pending = %d with %d chained, want %d", s.Pending, bound, bound)
	}
	extra := wq.NewWork(func() {})
	if q.QueueKeyed(1, extra) || q.QueueKeyed(2, extra) || q.Queue(extra) {
		t.Fatal("a queue call beyond the bound was accepted")
	}
	if extra.Pending() {
		t.Fatal("refused item left pending")
	}
	if errs.count(wq.ErrQueueFull) == 0 {
		t.Error("ErrQueueFull not reported")
	}
	b.free()
	q.Flush()
	if ran.Load() != bound {
		t.Fatalf("ran %d, want %d", ran.Load(), bound)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("chain order %v", order)
		}
	}
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 {
		t.Errorf("after Flush: Pending = %d, count = %d", s.Pending, q.PendingCount())
	}
}

// TestQueueContextWokenByRoom: a QueueContext on a full queue waits, and
// returns nil once an item starts.
func TestQueueContextWokenByRoom(t *testing.T) {
	// Catches a QueueContext that fails, spins, or is never woken.
	q := allocBounded(t, "bp-ctx-room", wq.Unbound, 1, 1)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	b2 := newBlocker()
	defer b2.free()
	if !q.Queue(b2.w) { // fills the queue
		t.Fatal("Queue below the bound = false")
	}
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	done := make(chan error, 1)
	go func() { done <- q.QueueContext(context.Background(), w) }()
	waitFor(t, "QueueContext to wait", func() bool { return q.RoomWaiters() == 1 })
	select {
	case err := <-done:
		t.Fatalf("QueueContext returned %v on a full queue", err)
	default:
	}
	b.free() // b2 starts: room for w
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("QueueContext = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("QueueContext not woken by room")
	}
	b2.free()
	q.Flush()
	if !ran.Load() {
		t.Error("the item queued by QueueContext did not run")
	}
	if q.RoomWaiters() != 0 || q.PendingCount() != 0 {
		t.Errorf("waiters %d, count %d after Flush", q.RoomWaiters(), q.PendingCount())
	}
}

func TestQueueContextDeadlineAndRefusals(t *testing.T) {
	// Catches a cancelled QueueContext that queues anyway or leaves its
	// item pending, and refusals reported as nil.
	q := allocBounded(t, "bp-ctx-dl", wq.Unbound, 1, 1)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	fill := wq.NewWork(func() {})
	q.Queue(fill)
	w := wq.NewWork(func() {})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.QueueContext(ctx, w); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("QueueContext on a full queue past its deadline = %v", err)
	}
	if w.Pending() {
		t.Fatal("item pending after a QueueContext that timed out")
	}
	// Already pending: nil, without waiting.
	if err := q.QueueContext(context.Background(), fill); err != nil {
		t.Fatalf("QueueContext of a pending item = %v, want nil", err)
	}
	// ctx already done: ctx.Err(), nothing queued, also with room.
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	b.free()
	q.Flush()
	if err := q.QueueContext(done, w); !errors.Is(err, context.Canceled) || w.Pending() {
		t.Fatalf("QueueContext(cancelled ctx) = %v, pending %v", err, w.Pending())
	}
	if err := q.QueueContext(context.Background(), nil); !errors.Is(err, wq.ErrNoFunc) {
		t.Fatalf("QueueContext(nil) = %v, want ErrNoFunc", err)
	}
	if err := q.QueueContext(context.Background(), &wq.Work{}); !errors.Is(err, wq.ErrNoFunc) {
		t.Fatalf("QueueContext(zero Work) = %v, want ErrNoFunc", err)
	}
	q.Destroy()
	if err := q.QueueContext(context.Background(), w); !errors.Is(err, wq.ErrDestroyed) {
		t.Fatalf("QueueContext after Destroy = %v, want ErrDestroyed", err)
	}
	// Unbounded queue: never waits.
	u := mustAlloc(t, "bp-ctx-unbounded", wq.Unbound, 1)
	if err := u.QueueContext(context.Background(), w); err != nil {
		t.Fatalf("QueueContext on an unbounded queue = %v", err)
	}
	u.Flush()
}

// TestQueueContextManyWaiters: many producers through QueueContext on a
// small bound all get their items run, and the count returns to 0.
func TestQueueContextManyWaiters(t *testing.T) {
	// Catches lost wake-ups (a waiter left behind with room free) and
	// count leaks under contention.
	q := allocBounded(t, "bp-ctx-many", wq.Unbound, 2, 3)
	var ran atomic.Int64
	const producers, per = 8, 50
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				w := wq.NewWork(func() { ran.Add(1) })
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				err := q.QueueContext(ctx, w)
				cancel()
				if err != nil {
					t.Errorf("QueueContext = %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	q.Flush()
	if ran.Load() != producers*per {
		t.Fatalf("ran %d, want %d", ran.Load(), producers*per)
	}
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 || q.RoomWaiters() != 0 {
		t.Errorf("Pending %d, count %d, waiters %d", s.Pending, q.PendingCount(), q.RoomWaiters())
	}
}

// TestMaxPendingDelayedCountWhenQueued: an armed delayed item does not
// count, its firing is never refused, and the count stays consistent.
func TestMaxPendingDelayedCountWhenQueued(t *testing.T) {
	// Catches armed items refused at fire time (work dropped) or counted
	// while armed.
	q := allocBounded(t, "bp-delayed", wq.Unbound, 1, 1)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	var ran atomic.Int64
	dws := make([]*wq.DelayedWork, 3)
	for i := range dws {
		dws[i] = wq.NewDelayedWork(func() { ran.Add(1) })
		if !q.QueueDelayed(dws[i], time.Millisecond) {
			t.Fatalf("QueueDelayed %d refused", i)
		}
	}
	if q.PendingCount() != 0 {
		t.Errorf("armed items counted: %d", q.PendingCount())
	}
	waitFor(t, "timers to fire", func() bool { return q.Stats().Pending == 3 })
	if c := q.PendingCount(); c != 3 {
		t.Errorf("count after firing = %d, want 3 (forced over the bound of 1)", c)
	}
	if q.Queue(wq.NewWork(func() {})) {
		t.Error("Queue accepted while the count exceeds the bound")
	}
	// No delay: QueueDelayed is Queue, refused too.
	if q.QueueDelayed(wq.NewDelayedWork(func() {}), 0) {
		t.Error("QueueDelayed(0) accepted on a full queue")
	}
	b.free()
	q.Flush()
	if ran.Load() != 3 || q.PendingCount() != 0 || q.Stats().Pending != 0 {
		t.Errorf("ran %d, count %d, Pending %d", ran.Load(), q.PendingCount(), q.Stats().Pending)
	}
}

// TestStatsPendingConsistentUnderRace: producers queue, key and cancel
// concurrently; Pending and the bound's count return to 0.
func TestStatsPendingConsistentUnderRace(t *testing.T) {
	// Catches a path that leaves the count (cancel from a list or a chain,
	// refusal, dedup) without adjusting it.
	for _, bound := range []int{0, 16} {
		var opts []wq.Option
		if bound > 0 {
			opts = append(opts, wq.WithMaxPending(bound))
		}
		q, err := wq.Alloc("bp-race", wq.Unbound, 2, opts...)
		if err != nil {
			t.Fatal(err)
		}
		wq.SetErrorHandler(func(string, string, error) {})
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := make([]*wq.Work, 16)
				for i := range ws {
					ws[i] = wq.NewWork(func() {})
				}
				for i := range 2000 {
					w := ws[i%len(ws)]
					switch i % 5 {
					case 0, 1:
						q.Queue(w)
					case 2:
						q.QueueKeyed(uint64(g*3+i%3), w)
					case 3:
						w.Cancel()
					case 4:
						q.QueueKeyed(uint64(g), w)
					}
				}
			}()
		}
		wg.Wait()
		q.Flush()
		s := q.Stats()
		if s.Pending != 0 || q.PendingCount() != 0 {
			t.Errorf("bound %d: after Flush Pending = %d, count = %d", bound, s.Pending, q.PendingCount())
		}
		if s.Adds < s.Total {
			t.Errorf("bound %d: Adds %d < Total %d", bound, s.Adds, s.Total)
		}
		q.Destroy()
		wq.SetErrorHandler(nil)
	}
}

// TestMaxPendingLeavesOnRearmAndCancelSync: an item taken off the queue by
// ModDelayed (re-armed) or CancelSync leaves the bound.
func TestMaxPendingLeavesOnRearmAndCancelSync(t *testing.T) {
	// Catches a grab that keeps the instance counted when its new owner
	// re-arms it or holds it (neither releases it): the queue would stay
	// full with nothing waiting.
	q := allocBounded(t, "bp-rearm", wq.Unbound, 1, 2)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	dw := wq.NewDelayedWork(func() {})
	w := wq.NewWork(func() {})
	if !q.Queue(&dw.Work) || !q.Queue(w) {
		t.Fatal("Queue below the bound = false")
	}
	if !q.ModDelayed(dw, time.Hour) {
		t.Fatal("ModDelayed of a pending item = false")
	}
	if c := q.PendingCount(); c != 1 {
		t.Errorf("count after re-arming a queued item = %d, want 1", c)
	}
	if !w.CancelSync() {
		t.Fatal("CancelSync of a pending item = false")
	}
	if c, p := q.PendingCount(), q.Stats().Pending; c != 0 || p != 0 {
		t.Errorf("after CancelSync: count %d, Pending %d; want 0", c, p)
	}
	dw.Cancel()
	b.free()
	q.Flush()
}

// BenchmarkQueueMaxPending is the queue call alone (as
// BenchmarkQueueNoTracer/queue: a frozen queue, items cancelled every
// 65536) on a queue bounded with MaxPending, unbounded (0) for comparison:
// the cost of the count's compare-and-swap on the queue path.
func BenchmarkQueueMaxPending(b *testing.B) {
	for _, n := range []int{0, 1 << 17} {
		b.Run(map[int]string{0: "unbounded", 1 << 17: "bounded"}[n], func(b *testing.B) {
			benchQueueOnly(b, wq.WithMaxPending(n))
		})
	}
}

// TestErrorCallsReturnQueueFull: on a full MaxPending queue QueueErr, Go,
// Group.Go and Submit return ErrQueueFull. Fault caught: the MaxPending
// check's refusal reported by the bool calls but lost on the calls that
// return errors.
func TestErrorCallsReturnQueueFull(t *testing.T) {
	q, err := wq.Alloc("full-errs", wq.Unbound, 1, wq.WithMaxPending(1))
	if err != nil {
		t.Fatal(err)
	}
	block, started := make(chan struct{}), make(chan struct{})
	if err := q.Go(func() { close(started); <-block }); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := q.Go(func() {}); err != nil { // the one item that may wait
		t.Fatalf("Go with room: %v", err)
	}
	if err := q.Go(func() {}); !errors.Is(err, wq.ErrQueueFull) {
		t.Errorf("Go on a full queue = %v, want ErrQueueFull", err)
	}
	if queued, err := q.QueueErr(wq.NewWork(func() {})); queued || !errors.Is(err, wq.ErrQueueFull) {
		t.Errorf("QueueErr on a full queue = %v, %v; want false, ErrQueueFull", queued, err)
	}
	ctx := context.Background()
	f := wq.Submit(q, ctx, func(context.Context) (int, error) { return 1, nil })
	if _, err := f.Wait(ctx); !errors.Is(err, wq.ErrQueueFull) {
		t.Errorf("Submit on a full queue: Wait = %v, want ErrQueueFull", err)
	}
	g, _ := q.NewGroup(ctx)
	g.Go(func(context.Context) error { return nil })
	close(block)
	if err := g.Wait(); !errors.Is(err, wq.ErrQueueFull) {
		t.Errorf("Group.Go on a full queue: Wait = %v, want ErrQueueFull", err)
	}
	q.Destroy()
}

// TestQueueContextRefusalDuringDestroyMatchesQueueErr: while Destroy
// drains, QueueContext is refused with an error that matches ErrDestroyed
// (and ErrDraining), as QueueErr's is, both for a waiter woken by the
// destroy and for a call made after it began. Catches QueueContext
// returning a bare ErrDraining there.
func TestQueueContextRefusalDuringDestroyMatchesQueueErr(t *testing.T) {
	q, err := wq.Alloc("bpe-destroy", wq.Unbound, 1, wq.WithMaxPending(1))
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
			t.Errorf("WithMaxPending(%d): QueueContext of an item running on another queue = %v, want ErrOtherQueue", bound, err)
		}
		if n := errs.count(wq.ErrOtherQueue) - before; n != 0 {
			t.Errorf("WithMaxPending(%d): QueueContext reported its refusal %d times, want 0 (it returns it)", bound, n)
		}
		if b.w.Pending() || q2.PendingCount() != 0 {
			t.Errorf("WithMaxPending(%d): refused item pending %v, count %d", bound, b.w.Pending(), q2.PendingCount())
		}
		b.free()
		q1.Flush()
	}
}
