package wq_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestDestroyContextDeadlineKeepsRefusing: DestroyContext returns at its
// deadline, the queue keeps refusing and drains alone, and a later Destroy
// waits for that drain.
func TestDestroyContextDeadlineKeepsRefusing(t *testing.T) {
	// Catches a DestroyContext that stops the drain at the deadline, a
	// queue that accepts work again after it, or a second Destroy that
	// does not wait.
	errs := captureErrors(t)
	q, err := wq.Alloc("sd-deadline", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	var ran atomic.Int64
	queued := wq.NewWork(func() { ran.Add(1) })
	q.Queue(queued) // inactive behind the blocker: the drain must run it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DestroyContext with a running item = %v, want DeadlineExceeded", err)
	}
	late := wq.NewWork(func() { ran.Add(100) })
	if q.Queue(late) || late.Pending() {
		t.Fatal("Queue accepted after DestroyContext's deadline")
	}
	if errs.count(wq.ErrDraining) == 0 {
		t.Error("refusal during the background drain not reported as ErrDraining")
	}
	if q.QueueDelayed(wq.NewDelayedWork(func() {}), time.Hour) {
		t.Error("QueueDelayed accepted after DestroyContext began")
	}
	// Already done: returns at once, the destroy still pending.
	dead, c2 := context.WithCancel(context.Background())
	c2()
	if err := q.DestroyContext(dead); !errors.Is(err, context.Canceled) {
		t.Fatalf("DestroyContext(cancelled) during the drain = %v", err)
	}
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	select {
	case <-destroyed:
		t.Fatal("Destroy returned while the first destroy still drains")
	case <-time.After(20 * time.Millisecond):
	}
	b.free()
	select {
	case <-destroyed:
	case <-time.After(30 * time.Second):
		t.Fatal("Destroy did not return after the drain")
	}
	if ran.Load() != 1 {
		t.Fatalf("ran = %d, want 1 (the queued item, not the refused one)", ran.Load())
	}
	if err := q.DestroyContext(context.Background()); err != nil {
		t.Fatalf("DestroyContext on a destroyed queue = %v", err)
	}
	if err := q.DestroyContext(dead); err != nil {
		t.Fatalf("DestroyContext(cancelled ctx) on a destroyed queue = %v, want nil", err)
	}
}

// TestDestroyContextRacingQueue: many goroutines queue while the queue is
// destroyed; every accepted item runs, none after Destroy returns.
func TestDestroyContextRacingQueue(t *testing.T) {
	// Catches an item accepted during the destroy and then dropped, or run
	// after DestroyContext returned nil.
	wq.SetErrorHandler(func(string, string, error) {})
	defer wq.SetErrorHandler(nil)
	for round := range 5 {
		q, err := wq.Alloc("sd-race", wq.Unbound, 4, wq.WithMaxPending(64))
		if err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		var after atomic.Bool
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					w := wq.NewWork(func() {
						if after.Load() {
							t.Error("an item ran after DestroyContext returned nil")
						}
						ran.Add(1)
					})
					if q.Queue(w) {
						accepted.Add(1)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					if q.QueueContext(ctx, wq.NewWork(func() { ran.Add(1) })) == nil {
						accepted.Add(1)
					}
					cancel()
				}
			}()
		}
		time.Sleep(time.Duration(round+1) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = q.DestroyContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("DestroyContext = %v", err)
		}
		after.Store(true)
		close(stop)
		wg.Wait()
		if a, r := accepted.Load(), ran.Load(); a != r {
			t.Fatalf("round %d: accepted %d items, ran %d", round, a, r)
		}
		if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 {
			t.Fatalf("after destroy Pending %d, count %d", s.Pending, q.PendingCount())
		}
	}
}

// TestDrainContextDeadlineKeepsDraining: after DrainContext's deadline the
// queue does not silently accept work again; it accepts once the drain
// has completed in the background.
func TestDrainContextDeadlineKeepsDraining(t *testing.T) {
	// Catches the old behaviour: draining mode dropped at the deadline.
	errs := captureErrors(t)
	q := mustAlloc(t, "sd-drain", wq.Unbound, 1)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.DrainContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DrainContext = %v, want DeadlineExceeded", err)
	}
	w := wq.NewWork(func() {})
	if q.Queue(w) {
		t.Fatal("Queue accepted after DrainContext's deadline, drain not complete")
	}
	if errs.count(wq.ErrDraining) != 1 {
		t.Errorf("ErrDraining reported %d times, want 1", errs.count(wq.ErrDraining))
	}
	if err := q.QueueContext(context.Background(), w); !errors.Is(err, wq.ErrDraining) {
		t.Fatalf("QueueContext during the background drain = %v, want ErrDraining", err)
	}
	b.free()
	waitFor(t, "the background drain to end", func() bool { return q.Queue(w) })
	q.Flush()
}

// TestCancelPendingCancelsWaitingItems covers lists, inactive items,
// chains and armed timers, and leaves the running item alone.
func TestCancelPendingCancelsWaitingItems(t *testing.T) {
	// Catches a kind of waiting item left queued, a running item disturbed,
	// or a wrong count.
	q := allocBounded(t, "sd-cancel", wq.Unbound, 2, 100)
	b1, b2 := newBlocker(), newBlocker()
	defer b1.free()
	defer b2.free()
	q.QueueKeyed(7, b1.w)
	b1.waitStarted(t)
	q.Queue(b2.w)
	b2.waitStarted(t)
	var ran atomic.Int64
	fn := func() { ran.Add(1) }
	for range 5 {
		q.Queue(wq.NewWork(fn)) // inactive: max_active 2 is taken
	}
	for range 4 {
		q.QueueKeyed(7, wq.NewWork(fn)) // chained behind b1
	}
	var dws []*wq.DelayedWork
	for range 3 {
		dw := wq.NewDelayedWork(fn)
		q.QueueDelayed(dw, time.Hour)
		dws = append(dws, dw)
	}
	if s := q.Stats(); s.Pending != 9 {
		t.Fatalf("Stats.Pending = %d, want 9", s.Pending)
	}
	if n := q.CancelPending(); n != 12 {
		t.Fatalf("CancelPending = %d, want 12", n)
	}
	for _, dw := range dws {
		if dw.Pending() {
			t.Fatal("armed item still pending")
		}
	}
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 2 {
		t.Errorf("after CancelPending: Pending %d, count %d; want 0, 2 (the running items)", s.Pending, q.PendingCount())
	}
	if b1.w.Busy()&wq.BusyRunning == 0 || b2.w.Busy()&wq.BusyRunning == 0 {
		t.Error("a running item was disturbed")
	}
	b1.free()
	b2.free()
	q.Flush()
	if ran.Load() != 0 {
		t.Errorf("%d cancelled items ran", ran.Load())
	}
	// The queue and the key go on.
	q.QueueKeyed(7, wq.NewWork(fn))
	q.Flush()
	if ran.Load() != 1 {
		t.Error("the queue did not accept work after CancelPending")
	}
	if q.CancelPending() != 0 {
		t.Error("CancelPending of an idle queue != 0")
	}
}

// TestCancelPendingRacingQueueKeyed: every item is either cancelled or
// run, exactly once, and the keys do not stall.
func TestCancelPendingRacingQueueKeyed(t *testing.T) {
	// Catches a chain left stalled, an item both run and counted as
	// cancelled, or a lost item.
	q := mustAlloc(t, "sd-cancel-keyed", wq.Unbound, 2)
	var ran, queued, cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				if q.QueueKeyed(uint64(g*4+i%4), wq.NewWork(func() { ran.Add(1) })) {
					queued.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			cancelled.Add(int64(q.CancelPending()))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	wg.Wait()
	done := make(chan struct{})
	go func() { q.Flush(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Flush hung: a key's chain stalled after CancelPending")
	}
	if r, c, n := ran.Load(), cancelled.Load(), queued.Load(); r+c != n {
		t.Fatalf("ran %d + cancelled %d != queued %d", r, c, n)
	}
	if s := q.Stats(); s.Pending != 0 {
		t.Errorf("Pending = %d after Flush", s.Pending)
	}
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Errorf("%d keys still in flight", keys)
	}
}

// TestDestroyContextCancelledCtxBeginsDestroy: a ctx already done still
// begins the destroy (the queue refuses at once) and returns ctx.Err().
func TestDestroyContextCancelledCtxBeginsDestroy(t *testing.T) {
	// Catches a DestroyContext that returns early without beginning, so
	// the queue would still accept work.
	wq.SetErrorHandler(func(string, string, error) {})
	defer wq.SetErrorHandler(nil)
	q, err := wq.Alloc("sd-cancelled", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("DestroyContext(cancelled) with a running item = %v, want Canceled", err)
	}
	if q.Queue(wq.NewWork(func() {})) {
		t.Fatal("Queue accepted after DestroyContext(cancelled)")
	}
	b.free()
	q.Destroy()
	if q.Queue(wq.NewWork(func() {})) {
		t.Fatal("Queue accepted after Destroy")
	}
}

// A timer that fires while Destroy runs, and QueueOn/ModDelayedOn/Congested
// after Destroy, must not touch the emptied table.
func TestCallsAfterDestroyDoNotPanic(t *testing.T) {
	for i := 0; i < 20; i++ {
		errs := captureErrors(t)
		q, _ := wq.Alloc("late", wq.PerCPU, 0)
		dw := wq.NewDelayedWork(func() {})
		q.QueueDelayed(dw, time.Duration(i%4)*100*time.Microsecond)
		q.Destroy()
		w := wq.NewWork(func() {})
		if q.QueueOn(0, w) || q.QueueDelayedOn(0, dw, time.Millisecond) || q.ModDelayedOn(0, dw, 0) || q.Congested(0) {
			t.Fatal("a call on a destroyed queue succeeded")
		}
		if dw.Pending() {
			t.Fatal("delayed item pending after Destroy")
		}
		if errs.count(wq.ErrDestroyed) == 0 {
			t.Fatal("no ErrDestroyed reported")
		}
		wq.SetErrorHandler(nil)
	}
}

func TestDestroyRacingAttributeChanges(t *testing.T) {
	captureErrors(t)
	for i := 0; i < 20; i++ {
		q, _ := wq.Alloc("attrrace", wq.Unbound, 0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = q.SetAffinityStrict(k%2 == 0)
				_ = q.SetMaxActive(1 + k%4)
			}
		}()
		w := wq.NewWork(func() {})
		q.Queue(w)
		mustReturn(t, "Destroy", q.Destroy)
		close(stop)
		wg.Wait()
		if err := q.SetAffinityStrict(true); !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("attribute write after Destroy: %v, want ErrDestroyed", err)
		}
		if err := q.SetMaxActive(2); !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("SetMaxActive after Destroy: %v, want ErrDestroyed", err)
		}
		if n := q.NumPwqs(); n != 0 {
			t.Fatalf("%d pwqs installed after Destroy", n)
		}
	}
}

// TestDrainingReportedOncePerDrain: queue attempts refused while a queue
// drains return false every time, but the error handler hears of the
// first of each drain only (a producer that keeps queueing would report
// thousands), and a later drain reports again.
func TestDrainingReportedOncePerDrain(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "drain-once", wq.Unbound, 0)
	for round := 1; round <= 2; round++ {
		release := make(chan struct{})
		started := make(chan struct{})
		blocker := wq.NewWork(func() { close(started); <-release })
		q.Queue(blocker)
		<-started
		done := make(chan struct{})
		go func() { q.Drain(); close(done) }()
		refused := 0
		for refused < 100 {
			if !q.Queue(wq.NewWork(func() {})) {
				refused++
			}
			runtime.Gosched()
		}
		close(release)
		<-done
		if n := errs.count(wq.ErrDraining); n != round {
			t.Fatalf("drain %d: %d ErrDraining reports after %d refusals in all, want %d", round, n, 100*round, round)
		}
	}
}

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

func TestDestroyDrainsChained(t *testing.T) {
	errs := captureErrors(t)
	q, err := wq.Alloc("destroy", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	var w *wq.Work
	w = wq.NewWork(func() {
		time.Sleep(time.Millisecond)
		if runs.Add(1) < 10 {
			q.Queue(w) // chained work is allowed while draining
		}
	})
	q.Queue(w)
	q.Destroy()
	if runs.Load() != 10 {
		t.Errorf("Destroy did not drain chained work: %d runs, want 10", runs.Load())
	}
	late := wq.NewWork(func() { t.Error("ran after destroy") })
	if q.Queue(late) || q.Queue(late) {
		t.Error("Queue after Destroy returned true")
	}
	if late.Pending() {
		t.Error("item left pending after a refused Queue")
	}
	if n := errs.count(wq.ErrDestroyed); n != 1 {
		t.Errorf("ErrDestroyed reported %d times, want once", n)
	}
	q.Destroy() // idempotent
}

// TestQueueRacingDestroy: a Queue that returns true while Destroy runs
// concurrently is run before Destroy returns; one refused leaves the item
// idle (the second stranger's finding).
func TestQueueRacingDestroy(t *testing.T) {
	errs := captureErrors(t) // ErrDestroyed reports are expected
	for round := 0; round < 200; round++ {
		q, err := wq.Alloc("race-destroy", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int64
		works := []*wq.Work{wq.NewWork(func() { runs.Add(1) }), wq.NewWork(func() { runs.Add(1) })}
		stop := make(chan struct{})
		done := make(chan int64)
		go func() {
			var ok int64
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- ok
					return
				default:
				}
				if q.Queue(works[i%2]) {
					ok++
				}
			}
		}()
		time.Sleep(200 * time.Microsecond)
		q.Destroy()
		close(stop)
		ok := <-done
		if got := runs.Load(); got != ok {
			t.Fatalf("round %d: %d queue calls returned true, %d runs when Destroy returned (deadlock reports %d, draining reports %d)", round, ok, got, errs.count(wq.ErrDeadlock), errs.count(wq.ErrDraining))
		}
		for i, w := range works {
			if w.Busy() != 0 {
				t.Fatalf("round %d: item %d left busy %v after Destroy", round, i, w.Busy())
			}
		}
	}
}
