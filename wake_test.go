package wq_test

import (
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
)

// TestUnboundConcurrencyManaged: an unbound pool runs at most as many
// CPU-bound items at once as its workers have CPUs (more would only hand
// Ps to each other), and a worker that blocks stops counting, so items
// that wait for each other all get to run. Neither half asserts a time:
// the first counts overlaps, the second would hang without the mechanism
// (bounded by a 30 s failure).
func TestUnboundConcurrencyManaged(t *testing.T) {
	q := mustAlloc(t, "ub-cm", wq.Unbound, 0)
	if err := q.SetAffinityScope(wq.ScopeSystem); err != nil {
		t.Fatal(err)
	}
	// A nice of its own gives the queue a pool of its own (unbound pools
	// are shared by attributes), whose workers the test can count: nice 7,
	// or 19 where a niced unprivileged process may not set 7.
	if err := q.SetNice(reachableNice(t, 7)); err != nil {
		t.Fatal(err)
	}
	// The pool's CPUs: the process's allowed CPUs (any thread's mask may
	// differ from the test thread's; the pool uses the process's).
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &set); err != nil {
		t.Fatal(err)
	}
	ncpu := set.Count()
	t.Run("cpu-bound", func(t *testing.T) {
		// A CPU-bound item's thread can still be seen asleep: a locked
		// thread sleeps while it waits for a P, and the Go scheduler and a
		// GC stop-the-world park it. The pool then starts one more item
		// (a CM wake-up), or lifts its limit if the sleep lasts, and the
		// counts are not asserted.
		blocked0, cmw0 := wq.UnboundBlockingEntries(), q.Stats().CMW
		var running, maxRunning atomic.Int32
		var wg sync.WaitGroup
		n := 3 * ncpu
		for i := 0; i < n; i++ {
			wg.Add(1)
			q.Queue(wq.NewWork(func() {
				defer wg.Done()
				r := running.Add(1)
				for {
					m := maxRunning.Load()
					if r <= m || maxRunning.CompareAndSwap(m, r) {
						break
					}
				}
				// 5 ms of CPU: under cpu_intensive_thresh (10 ms), so none is
				// released as CPU-intensive, and under the Go scheduler's
				// 10 ms preemption, which parks a locked thread.
				for t0 := time.Now(); time.Since(t0) < 5*time.Millisecond; {
				}
				running.Add(-1)
			}))
		}
		wg.Wait()
		if wq.UnboundBlockingEntries() != blocked0 || q.Stats().CMW != cmw0 {
			t.Logf("a worker was seen asleep during the CPU-bound items (waiting for a P, Go preemption or GC): one more item may start, as for any blocked worker; counts not asserted")
			return
		}
		if m := maxRunning.Load(); int(m) > ncpu {
			t.Errorf("%d CPU-bound items ran at once on an unbound pool of %d CPUs", m, ncpu)
		}
		// The Go runtime alone would keep the overlap at GOMAXPROCS; what
		// the pool's concurrency management saves is the threads: ncpu
		// running workers and the one idle worker kept ahead of need.
		for _, pi := range wq.Pools() {
			if pi.CPU == -1 && pi.Nice == 7 && len(pi.Workers) > ncpu+1 {
				t.Errorf("the pool made %d workers for CPU-bound items on %d CPUs (want at most %d): %+v", len(pi.Workers), ncpu, ncpu+1, pi)
			}
		}
	})
	t.Run("blocking", func(t *testing.T) {
		n := 3*ncpu + 1
		var started atomic.Int32
		all, giveUp := make(chan struct{}), make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			q.Queue(wq.NewWork(func() {
				defer wg.Done()
				if int(started.Add(1)) == n {
					once.Do(func() { close(all) })
				}
				select {
				case <-all:
				case <-giveUp:
				}
			}))
		}
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			t.Errorf("only %d of %d items that wait for each other started: blocked workers still count as running", started.Load(), n)
			close(giveUp)
		}
		wg.Wait()
	})
}
