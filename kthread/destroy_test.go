package kthread_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

// TestDestroyLeavesNothingPending: Destroy with delayed items armed (one
// hour, a few ms, several at once, one re-armed from the running item
// during the drain, one queued behind the running item) runs what was
// queued, cancels what was armed and names it in ErrDelayedPending; after
// it returns no item of the worker is pending, FlushWork and the cancels
// of each return at once, and each can be queued on another worker, where
// it runs exactly once.
func TestDestroyLeavesNothingPending(t *testing.T) {
	errs := captureErrors(t)
	for _, c := range []struct {
		name   string
		delays []time.Duration // armed before Destroy; 0 = queued
		rearm  time.Duration   // the running item re-arms itself with this during the drain, -1 = not
	}{
		{"one-hour", []time.Duration{time.Hour}, -1},
		{"several", []time.Duration{time.Hour, time.Hour, 2 * time.Hour, time.Minute}, -1},
		{"mixed", []time.Duration{0, time.Hour, 0, time.Minute, 0}, -1},
		{"short", []time.Duration{time.Millisecond, 2 * time.Millisecond, time.Hour}, -1},
		{"rearm-during-drain", []time.Duration{time.Hour}, time.Hour},
		{"rearm-now-during-drain", nil, 0},
	} {
		wk, err := kthread.CreateWorker("kt-dd-" + c.name)
		if err != nil {
			t.Fatal(err)
		}
		runs := make([]atomic.Int32, len(c.delays)+1)
		dws := make([]*kthread.DelayedWork, len(c.delays)+1)
		for i := range c.delays {
			dws[i] = kthread.NewDelayedWork(func() { runs[i].Add(1) })
		}
		// The last item holds the worker while Destroy begins, and
		// re-arms itself (refused: the worker is dying) if asked to.
		last := len(c.delays)
		started, release := make(chan struct{}), make(chan struct{})
		var rearmed atomic.Bool
		dws[last] = kthread.NewDelayedWork(func() {
			if runs[last].Add(1) == 1 {
				close(started)
				<-release
				if c.rearm >= 0 {
					rearmed.Store(wk.QueueDelayedWork(dws[last], c.rearm))
				}
			}
		})
		wk.QueueDelayedWork(dws[last], 0)
		<-started
		armed := 0
		for i, d := range c.delays {
			if !wk.QueueDelayedWork(dws[i], d) {
				t.Fatalf("%s: QueueDelayedWork(%d, %v) = false", c.name, i, d)
			}
			if d > 0 {
				armed++
			}
		}
		res := make(chan error)
		go func() { res <- wk.Destroy() }()
		waitFor(t, c.name+": Destroy to begin", func() bool { return kthread.Dying(wk) })
		close(release)
		var derr error
		within(t, c.name+": Destroy", func() { derr = <-res })
		if rearmed.Load() {
			t.Errorf("%s: re-arming during the drain = true, want false (dying)", c.name)
		}
		// Timers of a few ms may have fired before Destroy took the
		// worker: those items were queued and ran; the rest were cancelled.
		ranArmed := 0
		for i, d := range c.delays {
			switch n := runs[i].Load(); {
			case d == 0 && n != 1:
				t.Errorf("%s: queued item %d ran %d times, want 1", c.name, i, n)
			case d > 0 && n > 1:
				t.Errorf("%s: armed item %d ran %d times", c.name, i, n)
			case d > 0 && n == 1:
				ranArmed++
			}
		}
		cancelled := armed - ranArmed
		switch {
		case cancelled == 0 && derr != nil:
			t.Errorf("%s: Destroy = %v, want nil (nothing was armed)", c.name, derr)
		case cancelled > 0 && !errors.Is(derr, kthread.ErrDelayedPending):
			t.Errorf("%s: Destroy = %v, want ErrDelayedPending", c.name, derr)
		case cancelled > 0 && !strings.Contains(derr.Error(), "TestDestroyLeavesNothingPending"):
			t.Errorf("%s: %q does not name the cancelled functions", c.name, derr)
		}
		wk2 := newWorker(t, "kt-dd2-"+c.name)
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("%s: item %d pending after Destroy returned", c.name, i)
			}
			var flushed, cancel1, cancel2 bool
			within(t, c.name+": FlushWork and the cancels", func() {
				flushed = wk.FlushWork(&dw.Work)
				cancel1 = wk.CancelDelayedWorkSync(dw)
				cancel2 = wk.CancelWorkSync(&dw.Work)
			})
			if flushed || cancel1 || cancel2 {
				t.Errorf("%s: item %d: FlushWork %v, cancels %v %v after Destroy; want false", c.name, i, flushed, cancel1, cancel2)
			}
			before := runs[i].Load()
			if i%2 == 0 {
				if !wk2.QueueWork(&dw.Work) {
					t.Errorf("%s: QueueWork of item %d on another worker = false", c.name, i)
				}
			} else if !wk2.QueueDelayedWork(dw, time.Millisecond) {
				t.Errorf("%s: QueueDelayedWork of item %d on another worker = false", c.name, i)
			}
			within(t, c.name+": FlushWork on the other worker", func() { wk2.FlushWork(&dw.Work) })
			if got := runs[i].Load() - before; got != 1 {
				t.Errorf("%s: item %d ran %d times on the other worker, want 1", c.name, i, got)
			}
		}
		wk2.FlushWorker()
	}
	if n := errs.count(kthread.ErrOtherWorker); n != 0 {
		t.Errorf("ErrOtherWorker reported %d times: %v", n, errs.all())
	}
}

// TestDestroyRacingDelayedQueue: QueueDelayedWork and ModDelayedWork from
// several goroutines race Destroy. Whatever each call returned, after
// Destroy returns no item is pending, none runs again, and each runs
// exactly once when queued on another worker.
func TestDestroyRacingDelayedQueue(t *testing.T) {
	captureErrors(t)
	for round := range 20 {
		wk, err := kthread.CreateWorker("kt-ddrace")
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var runs [n]atomic.Int32
		var dws [n]*kthread.DelayedWork
		for i := range dws {
			dws[i] = kthread.NewDelayedWork(func() { runs[i].Add(1) })
		}
		var wg sync.WaitGroup
		for i := range dws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					d := []time.Duration{0, time.Microsecond, time.Millisecond, time.Hour}[(i+j)%4]
					if j%2 == 0 {
						wk.QueueDelayedWork(dws[i], d)
					} else {
						wk.ModDelayedWork(dws[i], d)
					}
				}
			}()
		}
		var derr error
		within(t, "Destroy", func() { derr = wk.Destroy() })
		if derr != nil && !errors.Is(derr, kthread.ErrDelayedPending) {
			t.Fatalf("round %d: Destroy = %v", round, derr)
		}
		within(t, "the queueing goroutines", wg.Wait)
		wk2, err := kthread.CreateWorker("kt-ddrace2")
		if err != nil {
			t.Fatal(err)
		}
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("round %d: item %d pending after Destroy", round, i)
			}
			before := runs[i].Load()
			if !wk2.QueueDelayedWork(dw, 0) {
				t.Errorf("round %d: item %d cannot be queued on another worker", round, i)
			}
			within(t, "FlushWork", func() { wk2.FlushWork(&dw.Work) })
			if got := runs[i].Load() - before; got != 1 {
				t.Errorf("round %d: item %d ran %d times on the other worker, want 1", round, i, got)
			}
		}
		if err := wk2.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPerCPUDestroyArmedDelayed: delayed items armed directly on a PerCPU
// set's workers are cancelled by the set's Destroy too, reported, and left
// idle.
func TestPerCPUDestroyArmedDelayed(t *testing.T) {
	s, err := kthread.NewPerCPU("kt-dd-pcpu", wqfallback.Queue(newFallback(t, "kt-dd-pcpu-wq")))
	if err != nil {
		t.Fatal(err)
	}
	var dws []*kthread.DelayedWork
	for _, cpu := range s.CPUs() {
		for range 2 {
			dw := kthread.NewDelayedWork(func() {})
			s.Worker(cpu).QueueDelayedWork(dw, time.Hour)
			dws = append(dws, dw)
		}
	}
	var derr error
	within(t, "Destroy", func() { derr = s.Destroy() })
	if !errors.Is(derr, kthread.ErrDelayedPending) {
		t.Errorf("Destroy = %v, want ErrDelayedPending", derr)
	}
	for i, dw := range dws {
		if dw.Pending() {
			t.Errorf("item %d pending after Destroy", i)
		}
	}
}

// A PerCPU set and its default-queue fallback (a goroutine-backed pool)
// leave no goroutine behind once both are destroyed: the fallback
// queue's last put marks its pool dead and waits for every worker it
// started. What can keep such a pool alive is another live queue of the
// same attributes (it shares the pool); then this test fails at once.
func TestPerCPUAndDefaultFallbackLeaveNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for round := range 5 {
		q, err := wq.Alloc("kt-leak-fb", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := kthread.NewPerCPU("kt-leak", wqfallback.Queue(q))
		if err != nil {
			q.Destroy()
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, cpu := range s.CPUs() {
			for range 4 {
				wg.Add(2)
				s.Queue(cpu, kthread.NewWork(wg.Done))
				q.Queue(wq.NewWork(wg.Done))
			}
		}
		within(t, "the items", wg.Wait)
		within(t, "Destroy", func() {
			if err := s.Destroy(); err != nil {
				t.Error(err)
			}
			q.Destroy()
		})
		if err := goleak.Find(ignore); err != nil {
			t.Fatalf("round %d: goroutines left after Destroy of the set and its fallback: %v", round, err)
		}
	}
}
