package wq_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/wqtrace"
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

// sparse queues n items on q one at a time, each after the pool's
// workers have parked, and waits for each.
func sparse(t *testing.T, q *wq.Workqueue, n int) {
	t.Helper()
	w := wq.NewWork(func() {})
	for i := 0; i < n; i++ {
		waitFor(t, "the pool's workers idle", func() bool { return poolsIdle(q) })
		time.Sleep(time.Millisecond) // from idle to parked
		q.Queue(w)
		w.Flush()
	}
}

// A thread worker's wake-ups record their P wait in the queue's Stats
// (on by default), none while it is turned off, and goroutine workers
// record none. Catches a P-wait figure that is never filled, or one
// charged to goroutine workers (which have no futex return to stamp).
func TestPWaitRecordedForThreadWorkers(t *testing.T) {
	defer wq.ForceThreads(false)()
	th := mustAlloc(t, "pwait-threads", wq.PerCPU, 0)
	sparse(t, th, 5)
	n := th.Stats().PWait.Count
	if n == 0 {
		t.Fatal("no P wait recorded for 5 wake-ups of a thread worker")
	}
	labsys.SetPWaitAccounting(false)
	sparse(t, th, 3)
	labsys.SetPWaitAccounting(true)
	if got := th.Stats().PWait.Count; got != n {
		t.Errorf("P wait recorded with the accounting off: %d -> %d", n, got)
	}
	g := mustAlloc(t, "pwait-goroutines", wq.Unbound, 0)
	sparse(t, g, 3)
	if got := g.Stats().PWait.Count; got != 0 {
		t.Errorf("goroutine-backed queue recorded %d P waits", got)
	}
}

// With every P kept busy by spinning goroutines, a woken thread worker
// still runs its items, and its waits are recorded (their size is not
// asserted: it depends on the machine). Catches a stamp that breaks the
// wake-up when no P is idle.
func TestPWaitUnderBusyPs(t *testing.T) {
	q := mustAlloc(t, "pwait-busy", wq.PerCPU, 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	before := q.Stats().PWait.Count
	w := wq.NewWork(func() {})
	for i := 0; i < 5; i++ {
		time.Sleep(time.Millisecond)
		q.Queue(w)
		w.Flush()
	}
	close(stop)
	wg.Wait()
	pw := q.Stats().PWait
	if pw.Count == before {
		t.Log("no wake-up was stamped (the worker never parked between items)")
	}
	t.Logf("P wait with every P busy: n %d, p50 %v, p99 %v, max %v", pw.Count,
		time.Duration(pw.Quantile(0.5)), time.Duration(pw.Quantile(0.99)), time.Duration(pw.MaxNs))
}

// BenchmarkPWaitRoundTrip is one queue-to-completion round trip of a
// per-CPU thread worker that parks between items, with the P-wait stamp
// on (the default) and off: the difference is the figure's cost per
// wake-up.
func BenchmarkPWaitRoundTrip(b *testing.B) {
	for _, on := range []bool{true, false} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			labsys.SetPWaitAccounting(on)
			defer labsys.SetPWaitAccounting(true)
			q, err := wq.Alloc("bench-pwait", wq.PerCPU, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			done := make(chan struct{}, 1)
			w := wq.NewWork(func() { done <- struct{}{} })
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Queue(w)
				<-done
			}
		})
	}
}

// A wake-up is recorded in PWait only when the woken worker then starts
// an item: a worker woken for an instance that it puts back (a
// runtime.Goexit in the tracer's execute_start) records none, and the
// worker woken next to run it records one. Both were recorded, at each
// dequeue: two P waits for one item.
func TestPWaitOnlyForWakeUpsThatStartAnItem(t *testing.T) {
	q := mustAlloc(t, "pwait-put-back", wq.Unbound, 0, wq.Threads())
	// Two workers, so that a second idle one is woken for the instance
	// put back.
	var started sync.WaitGroup
	started.Add(2)
	release := make(chan struct{})
	for range 2 {
		q.Queue(wq.NewWork(func() { started.Done(); <-release }))
	}
	mustReturn(t, "two items running at once", started.Wait)
	close(release)
	w := wq.NewWork(func() {})
	recorded := false
	for round := 0; round < 5; round++ {
		waitFor(t, "the pool's workers idle", func() bool { return poolsIdle(q) })
		time.Sleep(time.Millisecond) // from idle to parked
		before := q.Stats()
		var once atomic.Bool
		wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
			if ev.Kind == wqtrace.ExecuteStart && ev.Workqueue == q.Name() && once.CompareAndSwap(false, true) {
				runtime.Goexit() // the instance goes back first in line
			}
		}))
		q.Queue(w)
		mustReturn(t, "Flush", func() { w.Flush() })
		wq.SetTracer(nil)
		after := q.Stats()
		d, ran := after.PWait.Count-before.PWait.Count, after.Total-before.Total
		if d > ran {
			t.Fatalf("round %d: %d P waits recorded for %d item started", round, d, ran)
		}
		recorded = recorded || d > 0
	}
	if !recorded {
		t.Skip("no wake-up was measured (the workers never parked): nothing was tested")
	}
}
