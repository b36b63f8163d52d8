package wq_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// TestObsCountersKnownWorkload: N items give total N, infl 0 after Flush,
// and N observations in both histograms, on per-CPU and unbound queues.
func TestObsCountersKnownWorkload(t *testing.T) {
	const n = 50
	for _, f := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q := mustAlloc(t, "obs_count", f, 0)
		var ran atomic.Int64
		for range n {
			if !q.Queue(wq.NewWork(func() { ran.Add(1) })) {
				t.Fatal("Queue of a fresh item returned false")
			}
		}
		q.Flush()
		st := q.Stats()
		if st.Name != "obs_count" || st.Flags != q.Flags() || st.Policy != wq.PolicyNormal {
			t.Errorf("%v: identity %q %v %v", f, st.Name, st.Flags, st.Policy)
		}
		if st.Total != n || st.Infl != 0 || ran.Load() != n {
			t.Errorf("%v: total %d infl %d (ran %d), want total %d infl 0", f, st.Total, st.Infl, ran.Load(), n)
		}
		if st.Latency.Count != n || st.Exec.Count != n {
			t.Errorf("%v: histogram counts %d/%d, want %d", f, st.Latency.Count, st.Exec.Count, n)
		}
		var sum int64
		for _, b := range st.Exec.Buckets {
			sum += b.Count
		}
		if sum != n || st.Exec.Quantile(0.5) > st.Exec.MaxNs {
			t.Errorf("%v: exec buckets sum %d, p50 %d > max %d", f, sum, st.Exec.Quantile(0.5), st.Exec.MaxNs)
		}
		if st.Panics != 0 || st.Mayday != 0 || st.Rescued != 0 {
			t.Errorf("%v: unexpected panics/mayday/rescued %+v", f, st)
		}
	}
}

// TestObsInFlight: infl counts an item while it runs.
func TestObsInFlight(t *testing.T) {
	q := mustAlloc(t, "obs_infl", wq.Unbound, 0)
	release := make(chan struct{})
	w := wq.NewWork(func() { <-release })
	q.Queue(w)
	waitFor(t, "the item to start", func() bool { return w.Busy()&wq.BusyRunning != 0 })
	if st := q.Stats(); st.Total != 1 || st.Infl != 1 {
		t.Errorf("while running: total %d infl %d, want 1 and 1", st.Total, st.Infl)
	}
	close(release)
	q.Flush()
	if st := q.Stats(); st.Infl != 0 {
		t.Errorf("after flush: infl %d", st.Infl)
	}
}

// Stats after Destroy returns without a crash or a hang.
func TestStatsAfterDestroy(t *testing.T) {
	for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q, _ := wq.Alloc("statsdestroy", flags, 0)
		for i := 0; i < 5; i++ {
			w := wq.NewWork(func() {})
			q.Queue(w)
			w.Flush()
		}
		q.Destroy()
		if s := q.Stats(); s.Total != 5 {
			t.Errorf("%v: Stats().Total after Destroy = %d, want 5", flags, s.Total)
		}
	}
}

// Stats is safe from every tracer event, also activate_work, which is
// delivered under the pool lock, while another goroutine changes the
// queue's attributes (which takes the queue's lock and then the pool
// locks). Deadlocked within a few flips when Stats took the queue's lock.
func TestStatsFromTracerUnderAttributeChanges(t *testing.T) {
	q := mustAlloc(t, "stats-tracer-attrs", wq.Unbound, 0, wq.Threads())
	nices := [2]int{0, reachableNice(t, 1)} // two classes, two pools
	var calls atomic.Int64
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.ActivateWork && ev.Workqueue == q.Name() {
			_ = q.Stats()
			calls.Add(1)
		}
	}))
	t.Cleanup(func() { wq.SetTracer(nil) })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := make([]*wq.Work, 16)
			for i := range ws {
				ws[i] = wq.NewWork(func() {})
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, w := range ws {
					q.Queue(w)
				}
				// Stats is slow under -race: leave the pool lock free
				// between bursts, so that a flip is slowed by nothing but
				// a deadlock.
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	mustReturn(t, "attribute flips beside a tracer calling Stats", func() {
		// Flips for 2 s (at least 20): a deadlock came within a few; a
		// fixed number of flips would only measure the machine's speed.
		start := time.Now()
		for i := 0; i < 20 || time.Since(start) < 2*time.Second; i++ {
			if err := q.SetNice(nices[i%2]); err != nil {
				t.Errorf("SetNice(%d): %v", nices[i%2], err)
				break
			}
		}
	})
	close(stop)
	wg.Wait()
	wq.SetTracer(nil)
	if calls.Load() == 0 {
		t.Error("the tracer never ran: nothing was tested")
	}
}

// statsCounters lists the counters of Stats that must never decrease.
func statsCounters(s wq.QueueStats) map[string]int64 {
	return map[string]int64{
		"Total": s.Total, "CPUTime": int64(s.CPUTime), "CPUItsv": s.CPUItsv, "CMW": s.CMW, "RPR": s.RPR,
		"Mayday": s.Mayday, "Rescued": s.Rescued, "Panics": s.Panics, "Pushed": s.Pushed, "Bounced": s.Bounced,
		"ESC": s.ESC, "CreateErrors": s.CreateErrors, "Adds": s.Adds, "Latency.Count": s.Latency.Count,
		"Exec.Count": s.Exec.Count, "PWait.Count": s.PWait.Count,
	}
}

// monotonicScraper reads q.Stats in a loop until stop is closed and
// reports every counter that went down between two reads.
func monotonicScraper(t *testing.T, q *wq.Workqueue, stop <-chan struct{}) (wait func() int) {
	done := make(chan int)
	go func() {
		prev := statsCounters(q.Stats())
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			cur := statsCounters(q.Stats())
			n++
			for k, v := range cur {
				if v < prev[k] {
					t.Errorf("Stats().%s went down: %d -> %d", k, prev[k], v)
				}
			}
			prev = cur
		}
	}()
	return func() int { return <-done }
}

// Every exported counter of Stats is monotonic while items are queued,
// started, cancelled and put back (a tracer's runtime.Goexit at
// execute_start), and while attribute changes retire pwqs. Adds dropped
// by one (it was summed from counters read one after the other) and
// Total dropped when an instance dequeued was put back.
func TestStatsCountersMonotonic(t *testing.T) {
	nices := [2]int{0, reachableNice(t, 1)}
	for _, opts := range [][]wq.Option{nil, {wq.Threads()}} {
		q := mustAlloc(t, "stats-monotonic", wq.Unbound, 4, opts...)
		stop := make(chan struct{})
		wait := monotonicScraper(t, q, stop)
		var gexit atomic.Int64
		wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
			// Every 7th start ends the worker's goroutine before the
			// instance runs: it goes back first in line.
			if ev.Kind == wqtrace.ExecuteStart && ev.Workqueue == q.Name() && gexit.Add(1)%7 == 0 {
				runtime.Goexit()
			}
		}))
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := make([]*wq.Work, 32)
				for i := range ws {
					ws[i] = wq.NewWork(func() {})
				}
				for round := range 200 {
					for _, w := range ws {
						q.Queue(w)
					}
					if round%5 == g {
						for _, w := range ws[:8] {
							w.Cancel()
						}
					}
					if g == 0 && round%20 == 0 {
						if err := q.SetNice(nices[round/20%2]); err != nil {
							t.Errorf("SetNice: %v", err)
						}
					}
				}
			}()
		}
		wg.Wait()
		wq.SetTracer(nil)
		q.Flush()
		close(stop)
		if n := wait(); n < 10 {
			t.Errorf("only %d reads of Stats: nothing was tested", n)
		}
	}
}

// CreateErrors keeps the failed worker creations of the pools that the
// queue stopped using, after an attribute change and after Destroy.
// Fell to 0 when the failing pool was released.
func TestCreateErrorsSurviveAttributeChange(t *testing.T) {
	var fail atomic.Bool
	wq.SetCreateWorkerHook(func() error {
		if fail.Load() {
			return errors.New("injected: no threads")
		}
		return nil
	})
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })
	captureErrors(t)
	q, err := wq.Alloc("stats-create-errs", wq.Unbound|wq.MemReclaim, 0, wq.Threads())
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	w := wq.NewWork(func() {})
	q.Queue(w)
	waitFor(t, "a failed creation", func() bool { return q.Stats().CreateErrors > 0 })
	fail.Store(false)
	mustReturn(t, "Flush", func() { w.Flush() })
	before := q.Stats().CreateErrors
	if err := q.SetNice(reachableNice(t, 1)); err != nil {
		t.Fatal(err)
	}
	q.Queue(w)
	mustReturn(t, "Flush", func() { w.Flush() })
	if s := q.Stats(); s.CreateErrors < before || s.CreateError == "" {
		t.Errorf("after the attribute change: CreateErrors %d (was %d), CreateError %q", s.CreateErrors, before, s.CreateError)
	}
	q.Destroy()
	if s := q.Stats(); s.CreateErrors < before {
		t.Errorf("after Destroy: CreateErrors %d (was %d)", s.CreateErrors, before)
	}
}

// An instance put back by a runtime.Goexit in the tracer's execute_start
// (it never started) is counted once, when it starts: Latency.Count and
// Exec.Count equal Total. Its queue-to-start latency was observed at each
// dequeue, twice.
func TestStatsLatencyCountedOncePerStart(t *testing.T) {
	for _, opts := range [][]wq.Option{nil, {wq.Threads()}} {
		q := mustAlloc(t, "stats-latency-once", wq.Unbound, 0, opts...)
		var once atomic.Bool
		wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
			if ev.Kind == wqtrace.ExecuteStart && ev.Workqueue == q.Name() && once.CompareAndSwap(false, true) {
				runtime.Goexit() // the instance goes back first in line
			}
		}))
		w := wq.NewWork(func() {})
		q.Queue(w)
		mustReturn(t, "Flush", func() { w.Flush() })
		wq.SetTracer(nil)
		if !once.Load() {
			t.Fatal("the tracer never ended a worker: nothing was tested")
		}
		s := q.Stats()
		if s.Total != 1 || s.Latency.Count != s.Total || s.Exec.Count != s.Total {
			t.Errorf("Total %d, Latency.Count %d, Exec.Count %d: want 1 each", s.Total, s.Latency.Count, s.Exec.Count)
		}
	}
}
