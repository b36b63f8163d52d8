package wq_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// roundTripClasses are the classes whose thread workers park through
// park.go (allocOrSkip asks for Threads(): a default unbound queue would be
// goroutine-backed, whose workers hold no P to hand off) and
// that run with one P (RT pools reserve a P of their own, so a test at
// GOMAXPROCS 1 cannot hold them to one).
var roundTripClasses = []struct {
	name  string
	flags wq.Flags
}{
	{"normal per-CPU", wq.PerCPU},
	{"normal unbound", wq.Unbound},
	{"highpri per-CPU", wq.PerCPU | wq.HighPri},
}

// allocOrSkip allocates a thread-backed queue, skipping the test where the
// class needs a privilege this process lacks.
func allocOrSkip(t *testing.T, name string, flags wq.Flags) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, 0, wq.Threads())
	if errors.Is(err, wq.ErrPermission) {
		t.Skipf("%v: %v", flags, err)
	}
	if err != nil {
		t.Fatalf("Alloc(%q, %v): %v", name, flags, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// oneP runs the test at GOMAXPROCS 1: a goroutine readied by a work
// function then has no other P to be stolen to, so it stays in the
// worker's P until the worker gives that P up.
func oneP(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// TestReadiedWaiterHandsOffP: a goroutine readied by a work function (a
// channel send) or by the item's completion (Flush) makes the worker hand
// its P off as it parks. Fault caught: the worker parked with the waiter
// still in its P, which sysmon took back only after a tick of up to 10 ms.
func TestReadiedWaiterHandsOffP(t *testing.T) {
	const rounds = 20
	for _, c := range roundTripClasses {
		t.Run(c.name, func(t *testing.T) {
			q := allocOrSkip(t, "rt-handoff", c.flags)
			oneP(t)
			t.Run("channel", func(t *testing.T) {
				before := wq.ParkHandOffs()
				for range rounds {
					ch := make(chan struct{}, 1)
					q.Queue(wq.NewWork(func() { ch <- struct{}{} }))
					<-ch
				}
				// A few waiters may leave the P another way (the
				// worker's P taken back during a system call on its
				// way to park): most must have been handed off.
				if got := wq.ParkHandOffs() - before; got < rounds/2 {
					t.Fatalf("%d hand-offs for %d waiters readied by work functions, want at least %d", got, rounds, rounds/2)
				}
			})
			t.Run("flush", func(t *testing.T) {
				before := wq.ParkHandOffs()
				for range rounds {
					w := wq.NewWork(func() {})
					q.Queue(w)
					w.Flush()
				}
				if got := wq.ParkHandOffs() - before; got < rounds/2 {
					t.Fatalf("%d hand-offs for %d Flush waiters, want at least %d", got, rounds, rounds/2)
				}
			})
		})
	}
}

// TestParkKeepsPWithNothingRunnable: a worker whose items readied no
// goroutine parks keeping its P. Fault caught: handing the P off at every
// park, which makes each wake-up look for an idle P and raised the idle
// queue->start p50.
func TestParkKeepsPWithNothingRunnable(t *testing.T) {
	const rounds = 20
	for _, c := range roundTripClasses {
		t.Run(c.name, func(t *testing.T) {
			q := allocOrSkip(t, "rt-keep", c.flags)
			oneP(t)
			var done atomic.Int32
			before := wq.ParkHandOffs()
			for i := range rounds {
				q.Queue(wq.NewWork(func() { done.Add(1) }))
				// Poll with sleeps: a timer, not the worker, wakes this
				// goroutine, so nothing is runnable when the worker parks.
				deadline := time.Now().Add(time.Minute)
				for done.Load() != int32(i+1) {
					if time.Now().After(deadline) {
						t.Fatalf("item %d did not run in a minute", i)
					}
					time.Sleep(200 * time.Microsecond)
				}
				// Let the worker park before the next item.
				time.Sleep(time.Millisecond)
			}
			if got := wq.ParkHandOffs() - before; got > rounds/2 {
				t.Fatalf("%d hand-offs for %d items that readied no goroutine, want at most %d", got, rounds, rounds/2)
			}
		})
	}
}
