package kthread_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/kthread"
)

// selfCalls are the calls a delayed item makes on itself from its own
// function while a CancelDelayedWorkSync of it waits, with the kernel's
// answers: while a canceller holds the item, mod_delayed_work returns true
// without queueing, queueing returns false, cancel returns false, and the
// waits that would wait for the caller return at once (ErrDeadlock).
type selfCalls struct {
	mod, queue, queueDelayed, flush, cancel, cancelDelayed bool
	destroy                                                error
}

func (s selfCalls) check(t *testing.T, name string) {
	t.Helper()
	want := selfCalls{mod: true}
	if !errors.Is(s.destroy, kthread.ErrDeadlock) {
		t.Errorf("%s: Destroy from the item = %v, want ErrDeadlock", name, s.destroy)
	}
	s.destroy = nil
	if s != want {
		t.Errorf("%s: from the item while a canceller waits: %+v, want %+v", name, s, want)
	}
}

// TestSelfCallsWhileCancelling: an item's calls on itself from its own
// function while another goroutine waits in CancelDelayedWorkSync (or
// CancelWorkSync) return at once with the kernel's values, the canceller
// returns, and the item does not run again; with the item armed (pending)
// or not when the cancel began, and through both cancel calls.
func TestSelfCallsWhileCancelling(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-selfcancel")
	deadlocks := 0
	for _, c := range []struct {
		name        string
		armedBefore bool // the item re-armed itself before the cancel began
		delayed     bool // CancelDelayedWorkSync, else CancelWorkSync
		delay       time.Duration
	}{
		{"running", false, true, time.Millisecond},
		{"running+armed", true, true, time.Millisecond},
		{"running+queued", true, true, 0},
		{"running/cancel_work_sync", false, false, time.Millisecond},
		{"running+armed/cancel_work_sync", true, false, time.Hour},
	} {
		var dw *kthread.DelayedWork
		var runs atomic.Int32
		started, release := make(chan struct{}), make(chan struct{})
		var got selfCalls
		dw = kthread.NewDelayedWork(func() {
			if runs.Add(1) > 1 {
				return
			}
			if c.armedBefore {
				wk.ModDelayedWork(dw, c.delay)
			}
			close(started)
			<-release
			got.mod = wk.ModDelayedWork(dw, c.delay)
			got.queue = wk.QueueWork(&dw.Work)
			got.queueDelayed = wk.QueueDelayedWork(dw, c.delay)
			got.flush = wk.FlushWork(&dw.Work)
			got.cancel = wk.CancelWorkSync(&dw.Work)
			got.cancelDelayed = wk.CancelDelayedWorkSync(dw)
			wk.FlushWorker()
			got.destroy = wk.Destroy()
		})
		deadlocks += 5
		wk.QueueDelayedWork(dw, 0)
		<-started
		res := make(chan bool)
		go func() {
			if c.delayed {
				res <- wk.CancelDelayedWorkSync(dw)
			} else {
				res <- wk.CancelWorkSync(&dw.Work)
			}
		}()
		waitFor(t, c.name+": the canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 1 })
		close(release)
		var was bool
		within(t, c.name+": the canceller", func() { was = <-res })
		if was != c.armedBefore {
			t.Errorf("%s: cancel = %v, want %v (pending when it began)", c.name, was, c.armedBefore)
		}
		got.check(t, c.name)
		if dw.Pending() {
			t.Errorf("%s: pending after the cancel returned", c.name)
		}
		within(t, c.name+": FlushWorker", wk.FlushWorker)
		if n := runs.Load(); n != 1 {
			t.Errorf("%s: ran %d times, want 1 (cancelled)", c.name, n)
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != deadlocks {
		t.Errorf("ErrDeadlock reported %d times, want %d: %v", got, deadlocks, errs.all())
	}
}

// TestOutsideCallsWhileCancelling: the same calls from other goroutines
// while a canceller holds a running item: ModDelayedWork returns true and
// queues nothing, QueueWork and QueueDelayedWork return false, FlushWork
// waits for the running instance, a second canceller waits too and returns
// false; nothing runs after the cancel returned.
func TestOutsideCallsWhileCancelling(t *testing.T) {
	wk := newWorker(t, "kt-outcancel")
	for _, d := range []time.Duration{0, time.Microsecond, time.Hour} {
		var runs atomic.Int32
		started, release := make(chan struct{}), make(chan struct{})
		dw := kthread.NewDelayedWork(func() {
			if runs.Add(1) == 1 {
				close(started)
				<-release
			}
		})
		wk.QueueDelayedWork(dw, 0)
		<-started
		first, second := make(chan bool), make(chan bool)
		go func() { first <- wk.CancelDelayedWorkSync(dw) }()
		waitFor(t, "the canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 1 })
		if !wk.ModDelayedWork(dw, d) {
			t.Errorf("d=%v: ModDelayedWork during cancel = false, want true", d)
		}
		if wk.QueueWork(&dw.Work) || wk.QueueDelayedWork(dw, d) {
			t.Errorf("d=%v: queueing during cancel = true, want false", d)
		}
		if dw.Pending() {
			t.Errorf("d=%v: pending after calls during cancel", d)
		}
		go func() { second <- wk.CancelWorkSync(&dw.Work) }()
		waitFor(t, "the second canceller to wait", func() bool { return kthread.Canceling(&dw.Work) == 2 })
		flushed := make(chan bool)
		go func() { flushed <- wk.FlushWork(&dw.Work) }()
		// Two cancel barriers and the flush barrier wait behind the item.
		waitFor(t, "the flush to wait", func() bool { return kthread.Queued(wk) == 3 })
		close(release)
		var a, b, f bool
		within(t, "the cancellers and the flush", func() { a, b, f = <-first, <-second, <-flushed })
		if a || b || !f {
			t.Errorf("d=%v: cancels = %v, %v, flush = %v; want false, false, true", d, a, b, f)
		}
		if dw.Pending() {
			t.Errorf("d=%v: pending after the cancels returned", d)
		}
		wk.FlushWorker()
		if n := runs.Load(); n != 1 {
			t.Errorf("d=%v: ran %d times, want 1", d, n)
		}
	}
}

// TestModRacingCancel: ModDelayedWork from outside and from the item
// itself (which re-arms itself) races CancelDelayedWorkSync from another
// goroutine, many times, with delays of zero to a millisecond. Every call
// returns; once the modifiers have stopped, a last cancel leaves the item
// idle, and it never runs again.
func TestModRacingCancel(t *testing.T) {
	wk := newWorker(t, "kt-modrace")
	var dw *kthread.DelayedWork
	var runs atomic.Int64
	var stop atomic.Bool
	dw = kthread.NewDelayedWork(func() {
		runs.Add(1)
		if !stop.Load() {
			wk.ModDelayedWork(dw, time.Duration(runs.Load()%3)*500*time.Microsecond)
		}
	})
	var wg sync.WaitGroup
	const rounds = 300
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range rounds {
			wk.ModDelayedWork(dw, time.Duration(i%4)*300*time.Microsecond)
		}
	}()
	go func() {
		defer wg.Done()
		for range rounds {
			wk.CancelDelayedWorkSync(dw)
		}
	}()
	within(t, "the racing calls", wg.Wait)
	stop.Store(true)
	within(t, "the last cancel", func() { wk.CancelDelayedWorkSync(dw) })
	if dw.Pending() {
		t.Fatal("pending after the last CancelDelayedWorkSync")
	}
	n := runs.Load()
	// A timer armed before the cancel would fire within ms; flushing twice
	// lets anything already queued run, and the item must stay idle.
	wk.FlushWorker()
	wk.FlushWorker()
	if dw.Pending() || runs.Load() != n {
		t.Errorf("ran %d times after the last cancel returned (pending %v)", runs.Load()-n, dw.Pending())
	}
}

// TestQueueVariantsWhileRunning: calls from inside an item on itself with
// no canceller are the kernel's too: a running item may be queued again
// (it runs again after), ModDelayedWork of a running, idle item queues it
// and returns false, and the waits return ErrDeadlock.
func TestQueueVariantsWhileRunning(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-selfqueue")
	for i, call := range []func(*kthread.DelayedWork) bool{
		func(dw *kthread.DelayedWork) bool { return wk.QueueWork(&dw.Work) },
		func(dw *kthread.DelayedWork) bool { return wk.QueueDelayedWork(dw, 0) },
		func(dw *kthread.DelayedWork) bool { return wk.QueueDelayedWork(dw, time.Microsecond) },
		func(dw *kthread.DelayedWork) bool { return !wk.ModDelayedWork(dw, 0) },
		func(dw *kthread.DelayedWork) bool { return !wk.ModDelayedWork(dw, time.Microsecond) },
	} {
		var dw *kthread.DelayedWork
		var runs atomic.Int32
		var queued, flushed atomic.Bool
		dw = kthread.NewDelayedWork(func() {
			if runs.Add(1) > 1 {
				return
			}
			queued.Store(call(dw))
			flushed.Store(wk.FlushWork(&dw.Work))
		})
		wk.QueueDelayedWork(dw, 0)
		waitFor(t, fmt.Sprintf("call %d: the second run", i), func() bool { return runs.Load() == 2 })
		within(t, "FlushWork", func() { wk.FlushWork(&dw.Work) })
		if !queued.Load() || flushed.Load() {
			t.Errorf("call %d: queued %v, FlushWork(self) %v; want true, false", i, queued.Load(), flushed.Load())
		}
	}
	if got := errs.count(kthread.ErrDeadlock); got != 5 {
		t.Errorf("ErrDeadlock reported %d times, want 5: %v", got, errs.all())
	}
}
