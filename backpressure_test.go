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

// TestMaxPendingRefusesBeyondBound: max_active 1, one item running, 1000
// queued; only the first MaxPending wait (the running one holds the
// max_active place), the rest are refused with ErrQueueFull, and every
// accepted item runs.
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
	if c := q.PendingCount(); c != bound+1 {
		t.Errorf("count = %d, want %d (max_active 1 + MaxPending %d)", c, bound+1, bound)
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

// TestMaxPendingCountsKeyedChains: items waiting in a key's chain count:
// with max_active 1, the running keyed item and MaxPending chained behind
// it fill the queue.
func TestMaxPendingCountsKeyedChains(t *testing.T) {
	// Catches chained keyed items outside the bound (a key's chain would
	// grow without limit).
	errs := captureErrors(t)
	const bound = 5
	q := allocBounded(t, "bp-keyed", wq.Unbound, 1, bound)
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
	if q.PendingCount() != 1 {
		t.Errorf("armed items counted: %d, want 1 (the running blocker)", q.PendingCount())
	}
	waitFor(t, "timers to fire", func() bool { return q.Stats().Pending == 3 })
	if c := q.PendingCount(); c != 4 {
		t.Errorf("count after firing = %d, want 4 (forced over the bound of 1+1)", c)
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
	if c := q.PendingCount(); c != 2 {
		t.Errorf("count after re-arming a queued item = %d, want 2 (the blocker and w)", c)
	}
	if !w.CancelSync() {
		t.Fatal("CancelSync of a pending item = false")
	}
	if c, p := q.PendingCount(), q.Stats().Pending; c != 1 || p != 0 {
		t.Errorf("after CancelSync: count %d, Pending %d; want 1 (the blocker), 0", c, p)
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

// TestErrorCallsReturnQueueFull: on a full MaxPending queue the calls
// that never wait (QueueErr, Go, Group.TryGo) return ErrQueueFull, and so
// do Submit and Group.Go whose context ends while they wait for room.
// Fault caught: the MaxPending check's refusal reported by the bool calls
// but lost on the calls that return errors.
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
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	f := wq.Submit(q, ctx, func(context.Context) (int, error) { return 1, nil })
	if _, err := f.Wait(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Submit on a full queue past its deadline: Wait = %v, want DeadlineExceeded", err)
	}
	g, _ := q.NewGroup(ctx)
	if g.TryGo(func(context.Context) error { return nil }) {
		t.Error("TryGo on a full queue = true")
	}
	g.Go(func(context.Context) error { return nil })
	close(block)
	if err := g.Wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Group.Go on a full queue past the group's deadline: Wait = %v, want DeadlineExceeded", err)
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

// TestMaxPendingIdleQueueTakesMPlusN: an idle queue of max_active m and
// WithMaxPending(n) takes exactly m+n items queued at once, whatever the
// scheduling (whether or not a worker has started the first ones yet),
// from one producer and from 40 racing producers, on a goroutine-backed
// queue, a thread-backed one and a per-CPU one. Catches a bound that
// counts only the items not yet started (a second Go right after the
// first refused on an idle queue of max_active 1 and WithMaxPending(1)), and
// one that lets more than m+n in.
func TestMaxPendingIdleQueueTakesMPlusN(t *testing.T) {
	type setup struct {
		name  string
		flags wq.Flags
		opts  []wq.Option
	}
	setups := []setup{
		{"default", wq.Unbound, nil},
		{"threads", wq.Unbound, []wq.Option{wq.Threads()}},
		{"percpu", wq.PerCPU, nil},
	}
	for _, su := range setups {
		for _, mn := range [][2]int{{1, 1}, {3, 2}} {
			m, n := mn[0], mn[1]
			q := allocBounded(t, "bp-mn-"+su.name, su.flags, m, n, su.opts...)
			for round := range 20 {
				gate := make(chan struct{})
				var ran atomic.Int64
				fn := func() { <-gate; ran.Add(1) }
				accepted := 0
				if round%2 == 0 {
					// One producer, back to back.
					for range m + n + 3 {
						switch err := q.Go(fn); {
						case err == nil:
							accepted++
						case !errors.Is(err, wq.ErrQueueFull):
							t.Fatalf("%s m=%d n=%d: Go = %v", su.name, m, n, err)
						}
					}
				} else {
					// 40 producers released together.
					var ok atomic.Int64
					var wg sync.WaitGroup
					start := make(chan struct{})
					for range 40 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							if q.Go(fn) == nil {
								ok.Add(1)
							}
						}()
					}
					close(start)
					wg.Wait()
					accepted = int(ok.Load())
				}
				if accepted != m+n {
					close(gate)
					q.Flush()
					t.Fatalf("%s max_active %d MaxPending %d, round %d: idle queue took %d items at once, want %d", su.name, m, n, round, accepted, m+n)
				}
				close(gate)
				q.Flush()
				if int(ran.Load()) != accepted {
					t.Fatalf("%s: ran %d of %d accepted", su.name, ran.Load(), accepted)
				}
			}
			q.Destroy()
		}
	}
}

// TestMaxPendingRoomFreeOnceAnItemIsSeenEnded: a caller that has seen an
// item end (Future.Wait, Group.Wait, Flush returned) finds its place free
// at once. Catches a count that leaves only when the worker's bookkeeping
// after the item runs, a moment later: a Go right after a Wait refused.
func TestMaxPendingRoomFreeOnceAnItemIsSeenEnded(t *testing.T) {
	q := allocBounded(t, "bp-seen-ended", wq.Unbound, 1, 1)
	ctx := context.Background()
	for round := range 200 {
		f := wq.Submit(q, ctx, func(context.Context) (int, error) { return round, nil })
		g, _ := q.NewGroup(ctx)
		g.Go(func(context.Context) error { return nil })
		if _, err := f.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		// Both ended: the queue is empty, and takes m+n at once.
		gate := make(chan struct{})
		for i := range 2 {
			if err := q.Go(func() { <-gate }); err != nil {
				close(gate)
				t.Fatalf("round %d: Go %d after both Waits returned = %v, want nil", round, i, err)
			}
		}
		close(gate)
		w := wq.NewWork(func() {})
		q.Queue(w)
		w.Flush()
		if c := q.PendingCount(); c > 2 {
			t.Fatalf("round %d: count %d after Flush", round, c)
		}
		q.Flush()
	}
}

// TestBlockingSubmission: on a full queue, the calls that take a context
// (GoContext, Submit, Group.Go with the group's context, QueueContext)
// wait for room instead of returning ErrQueueFull, and queue their
// function once an item ends; Go, TryGo and QueueErr never wait.
// SetMaxActive raises the bound and wakes the waiters; Destroy wakes them
// with ErrDestroyed. Catches a waiting call that returns ErrQueueFull (the
// pipeline that drops records), one never woken, and a Destroy that
// leaves producers parked.
func TestBlockingSubmission(t *testing.T) {
	ctx := context.Background()
	q := allocBounded(t, "bp-blocking", wq.Unbound, 1, 1)
	gate := make(chan struct{})
	gates := []chan struct{}{gate}
	defer func() { // a failure must not leave the queue's Destroy waiting
		for _, g := range gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
	}()
	fill := func() {
		t.Helper()
		started := make(chan struct{})
		if err := q.Go(func() { close(started); <-gate }); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := q.Go(func() { <-gate }); err != nil {
			t.Fatal(err)
		}
	}
	fill()
	// The calls that never wait.
	if err := q.Go(func() {}); !errors.Is(err, wq.ErrQueueFull) {
		t.Fatalf("Go on a full queue = %v, want ErrQueueFull", err)
	}
	if _, err := q.QueueErr(wq.NewWork(func() {})); !errors.Is(err, wq.ErrQueueFull) {
		t.Fatalf("QueueErr on a full queue = %v, want ErrQueueFull", err)
	}
	g, _ := q.NewGroup(ctx)
	if g.TryGo(func(context.Context) error { return nil }) {
		t.Fatal("TryGo on a full queue = true")
	}
	// The calls that wait.
	var ran atomic.Int64
	goCtx := make(chan error, 1)
	go func() { goCtx <- q.GoContext(ctx, func(context.Context) { ran.Add(1) }) }()
	futs := make(chan *wq.Future[int], 1)
	go func() {
		futs <- wq.Submit(q, ctx, func(context.Context) (int, error) { ran.Add(1); return 7, nil })
	}()
	groupGo := make(chan struct{})
	go func() {
		g.Go(func(context.Context) error { ran.Add(1); return nil })
		close(groupGo)
	}()
	qctx := make(chan error, 1)
	go func() { qctx <- q.QueueContext(ctx, wq.NewWork(func() { ran.Add(1) })) }()
	waitFor(t, "four producers to wait for room", func() bool { return q.RoomWaiters() == 4 })
	select {
	case err := <-goCtx:
		t.Fatalf("GoContext returned %v on a full queue", err)
	case <-futs:
		t.Fatal("Submit returned on a full queue")
	case <-groupGo:
		t.Fatal("Group.Go returned on a full queue")
	case err := <-qctx:
		t.Fatalf("QueueContext returned %v on a full queue", err)
	default:
	}
	close(gate) // room: the four wait their turn and run
	mustReturn(t, "the waiting calls", func() {
		if err := <-goCtx; err != nil {
			t.Errorf("GoContext = %v", err)
		}
		if v, err := (<-futs).Wait(ctx); v != 7 || err != nil {
			t.Errorf("Submit's Wait = %d, %v", v, err)
		}
		<-groupGo
		if err := g.Wait(); err != nil {
			t.Errorf("Group.Wait = %v", err)
		}
		if err := <-qctx; err != nil {
			t.Errorf("QueueContext = %v", err)
		}
	})
	q.Flush()
	if ran.Load() != 4 {
		t.Fatalf("%d of the 4 waiting calls' functions ran", ran.Load())
	}

	// SetMaxActive moves the bound: a waiter gets in with nothing ended.
	gate = make(chan struct{})
	gates = append(gates, gate)
	fill()
	go func() { goCtx <- q.GoContext(ctx, func(context.Context) { <-gate }) }()
	waitFor(t, "a producer to wait for room", func() bool { return q.RoomWaiters() == 1 })
	if err := q.SetMaxActive(2); err != nil {
		t.Fatal(err)
	}
	mustReturn(t, "GoContext after SetMaxActive(2)", func() {
		if err := <-goCtx; err != nil {
			t.Errorf("GoContext after SetMaxActive(2) = %v", err)
		}
	})
	if err := q.Go(func() {}); !errors.Is(err, wq.ErrQueueFull) {
		t.Fatalf("Go with 3 items held, max_active 2 + MaxPending 1 = %v, want ErrQueueFull", err)
	}

	// Destroy wakes every parked producer with ErrDestroyed.
	const producers = 12
	errs := make(chan error, producers)
	for i := range producers {
		go func() {
			switch i % 3 {
			case 0:
				errs <- q.GoContext(ctx, func(context.Context) { ran.Add(1) })
			case 1:
				_, err := wq.Submit(q, ctx, func(context.Context) (int, error) { ran.Add(1); return 0, nil }).Wait(ctx)
				errs <- err
			default:
				g, _ := q.NewGroup(ctx)
				g.Go(func(context.Context) error { ran.Add(1); return nil })
				errs <- g.Wait()
			}
		}()
	}
	waitFor(t, "12 producers to wait for room", func() bool { return q.RoomWaiters() == producers })
	destroyed := make(chan struct{})
	ran.Store(0)
	go func() { q.Destroy(); close(destroyed) }()
	mustReturn(t, "the parked producers", func() {
		for range producers {
			if err := <-errs; !errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("parked producer woken by Destroy: %v, want ErrDestroyed", err)
			}
		}
	})
	close(gate)
	<-destroyed
	if ran.Load() != 0 {
		t.Errorf("%d refused functions ran", ran.Load())
	}
}

// TestQueueWaitSeesDestroyBegunWhileRegistering: a producer that starts to
// wait for room while Destroy begins is woken with the refusal, not left
// until an item ends. A hook begins the Destroy between the producer's
// first look at the queue and its registration as a waiter, where
// Destroy's wake-up finds no waiter yet. Catches a waiter that checks the
// queue's state only before registering.
func TestQueueWaitSeesDestroyBegunWhileRegistering(t *testing.T) {
	ctx := context.Background()
	q, err := wq.Alloc("bp-wait-destroy", wq.Unbound, 1, wq.WithMaxPending(1))
	if err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	started := make(chan struct{})
	q.Go(func() { close(started); <-gate })
	<-started
	q.Go(func() { <-gate })
	destroyed := make(chan struct{})
	var once sync.Once
	defer wq.SetBeforeRoomWait(func(hq *wq.Workqueue) {
		if hq != q {
			return
		}
		once.Do(func() {
			go func() { q.Destroy(); close(destroyed) }()
			for { // until the drain has begun and refuses
				if _, err := q.QueueErr(wq.NewWork(func() {})); errors.Is(err, wq.ErrDestroyed) {
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
	})()
	res := make(chan error, 1)
	go func() { res <- q.GoContext(ctx, func(context.Context) {}) }()
	select {
	case err := <-res:
		if !errors.Is(err, wq.ErrDestroyed) {
			t.Errorf("GoContext = %v, want ErrDestroyed", err)
		}
	case <-time.After(testWait):
		t.Errorf("GoContext still waiting %v after Destroy began", testWait)
	}
	close(gate)
	<-destroyed
}

// testWait bounds a wait that only a bug makes long.
const testWait = 20 * time.Second

// TestSubmitPipelineDropsNothing is a pond-style pipeline written from the
// mapping table: 100k records through blocking Submit on a queue with
// MaxPending, futures waited in order, the queue destroyed at the end
// (pond's Stop). Every record runs exactly once and none is refused.
// Catches a Submit that returns ErrQueueFull on a full queue (records
// silently dropped).
func TestSubmitPipelineDropsNothing(t *testing.T) {
	records := 100_000
	if testing.Short() {
		records = 10_000
	}
	q, err := wq.Alloc("bp-pipeline", wq.Unbound, 4, wq.WithMaxPending(16))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	seen := make([]atomic.Int32, records)
	futs := make(chan *wq.Future[int], 64)
	go func() {
		for i := range records {
			futs <- wq.Submit(q, ctx, func(context.Context) (int, error) {
				seen[i].Add(1)
				return i * 2, nil
			})
		}
		close(futs)
	}()
	i := 0
	for f := range futs {
		v, err := f.Wait(ctx)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if v != i*2 {
			t.Fatalf("record %d: value %d", i, v)
		}
		i++
	}
	q.Destroy()
	if i != records {
		t.Fatalf("%d futures, want %d", i, records)
	}
	for r := range seen {
		if n := seen[r].Load(); n != 1 {
			t.Fatalf("record %d ran %d times", r, n)
		}
	}
}
