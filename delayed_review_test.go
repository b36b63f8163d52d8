package wq_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestReviewDelayedFlushDuringDrain: an item armed before Drain began is
// accepted by the draining queue when its timer fires (queuePendedFrom
// with fromTimer), but DelayedWork.Flush of the same armed instance
// during the drain queues it with fromTimer=false: the queue refuses it
// with ErrDraining and the item is cancelled, so Flush returns having
// "waited" for a function that never ran.
func TestReviewDelayedFlushDuringDrain(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	q, err := wq.Alloc("rev-delayed-drain", wq.Unbound, 0, wq.WithErrorHandler(func(op, fn string, err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	g := newKeyGate() // keeps the drain going
	if !q.Queue(g.w) {
		t.Fatal("Queue(gate) = false")
	}
	waitChan(t, "gate", g.started)
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	if !q.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed = false")
	}
	drained := make(chan struct{})
	go func() { q.Drain(); close(drained) }()
	// Wait until the drain is under way: an outside Queue is refused.
	probe := wq.NewWork(func() {})
	deadline := time.Now().Add(60 * time.Second)
	for q.Queue(probe) {
		probe.Flush()
		if time.Now().After(deadline) {
			t.Fatal("Drain never began")
		}
		time.Sleep(time.Millisecond)
	}
	flushed := make(chan struct{})
	go func() { dw.Flush(); close(flushed) }()
	// The flushed instance must run once the gate opens (as a timer that
	// fired during the drain would).
	close(g.open)
	waitChan(t, "dw.Flush", flushed)
	waitChan(t, "Drain", drained)
	if n := ran.Load(); n != 1 {
		mu.Lock()
		defer mu.Unlock()
		draining := 0
		for _, e := range errs {
			if errors.Is(e, wq.ErrDraining) {
				draining++
			}
		}
		t.Errorf("the armed item ran %d times after DelayedWork.Flush during Drain, want 1 (%d ErrDraining report(s))", n, draining)
	}
}

// TestReviewModDelayedRacesExpiry: ModDelayed with delays of a few us
// races the timer's expiry (Go timers and, where permitted, the RT timer
// thread); after each round's Flush the item ran once or twice (twice
// when the first arming fired and ran before the second ModDelayed), never
// zero times (lost) nor three (fired twice), and Cancel leaves it idle.
func TestReviewModDelayedRacesExpiry(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"unbound", wq.Unbound}, {"percpu-rt", wq.PerCPU | wq.RT}, {"unbound-rt", wq.Unbound | wq.RT}} {
		t.Run(c.name, func(t *testing.T) {
			q, err := wq.Alloc("rev-mod-"+c.name, c.flags, 0)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			var runs atomic.Int32
			dw := wq.NewDelayedWork(func() { runs.Add(1) })
			for i := range 2000 {
				r0 := runs.Load()
				d1 := time.Duration(i%7) * time.Microsecond
				d2 := time.Duration(i%5) * 3 * time.Microsecond
				q.ModDelayed(dw, d1)
				for range i % 3 {
					runtime.Gosched()
				}
				q.ModDelayed(dw, d2)
				dw.Flush()
				if n := runs.Load() - r0; n < 1 || n > 2 {
					t.Fatalf("round %d: the item ran %d times (want 1 or 2)", i, n)
				}
				if i%4 == 0 {
					q.ModDelayed(dw, d1)
					dw.CancelSync()
					r1 := runs.Load()
					if dw.Pending() {
						t.Fatalf("round %d: pending after CancelSync", i)
					}
					dw.Flush()
					if runs.Load() != r1 {
						t.Fatalf("round %d: ran after CancelSync", i)
					}
				}
			}
		})
	}
}
