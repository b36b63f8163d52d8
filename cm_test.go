package wq_test

import (
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"golang.org/x/sys/unix"
)

// TestCMReactsToBlocking: a per-CPU pool starts its next item while the
// running one blocks, without waiting for the CM monitor's slow tick. The
// slow tick is set to an hour, so a pool that learns of the blocking only
// at the tick (the old 1 ms cadence, scaled up) never starts the second
// item and the test times out; no wall-clock threshold is asserted. Each
// way of blocking is checked: a Go channel (Go-level parking of the
// locked goroutine), time.Sleep, and a read on a pipe (a system call).
// (CMW is not asserted: if A is preempted by the Go scheduler before B is
// queued, its thread sleeps, and B is started by Queue's kick instead.)
func TestCMReactsToBlocking(t *testing.T) {
	restore := wq.SetCMTick(time.Hour)
	defer restore()
	fast0, _ := wq.CMPolls()
	defer func() {
		if fast, _ := wq.CMPolls(); fast == fast0 && !t.Failed() {
			t.Errorf("the CM monitor took no fast sample while items blocked behind pending work")
		}
	}()
	kinds := []struct {
		name  string
		block func(release <-chan struct{})
	}{
		{"channel", func(release <-chan struct{}) { <-release }},
		{"sleep", func(release <-chan struct{}) {
			for {
				select {
				case <-release:
					return
				default:
					time.Sleep(50 * time.Millisecond)
				}
			}
		}},
		{"pipe", nil},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			q := mustAlloc(t, "cmfast-"+k.name, wq.PerCPU, 0)
			release := make(chan struct{})
			released := false
			defer func() { // before the cleanup's Destroy, also on failure
				if !released {
					close(release)
				}
			}()
			block := k.block
			if block == nil {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				go func() { <-release; w.Write([]byte{1}); w.Close() }()
				// A blocking read(2) on the raw descriptor: the thread
				// sleeps in the kernel, not in the netpoller.
				fd := int(r.Fd()) // Fd puts the file in blocking mode
				block = func(<-chan struct{}) { readFD(fd) }
			}
			var aStarted, bQueued, bStarted atomic.Bool
			q.QueueOn(0, wq.NewWork(func() {
				aStarted.Store(true)
				// Stay runnable until B is pending, then block.
				for !bQueued.Load() {
				}
				block(release)
			}))
			waitFor(t, "item A to start", aStarted.Load)
			q.QueueOn(0, wq.NewWork(func() { bStarted.Store(true) }))
			bQueued.Store(true)
			deadline := time.Now().Add(10 * time.Second)
			for !bStarted.Load() {
				if time.Now().After(deadline) {
					f, a := wq.CMPolls()
					t.Fatalf("timed out waiting for item B to start while A blocks (%s); monitor samples fast=%d all=%d; %s", k.name, f, a, q.DumpState())
				}
				time.Sleep(200 * time.Microsecond)
			}
			close(release)
			released = true
			q.Flush()
		})
	}
}

// TestConcurrencyManagement: on a per-CPU pool, items that do not sleep
// never overlap; an item that sleeps lets the next one start.
func TestConcurrencyManagement(t *testing.T) {
	q := mustAlloc(t, "cm", wq.PerCPU, 0)
	type span struct{ a, b int64 }
	var mu sync.Mutex
	var spans []span
	spin := func() {
		s := time.Now().UnixNano()
		for time.Now().UnixNano()-s < int64(200*time.Microsecond) {
		}
		e := time.Now().UnixNano()
		mu.Lock()
		spans = append(spans, span{s, e})
		mu.Unlock()
	}
	for i := 0; i < 20; i++ {
		q.QueueOn(0, wq.NewWork(spin))
	}
	q.Flush()
	slices.SortFunc(spans, func(x, y span) int { return int(x.a - y.a) })
	for i := 1; i < len(spans); i++ {
		if spans[i].a < spans[i-1].b {
			t.Fatalf("non-sleeping items overlapped on a per-CPU pool: %v and %v", spans[i-1], spans[i])
		}
	}
	// A sleeping item must not hold back the next one.
	release := make(chan struct{})
	var second atomic.Bool
	q.QueueOn(0, wq.NewWork(func() { <-release }))
	q.QueueOn(0, wq.NewWork(func() { second.Store(true) }))
	waitFor(t, "CM to start the second item while the first sleeps", second.Load)
	close(release)
	q.Flush()
	if q.Stat("cmw") < 1 {
		t.Errorf("CMW = %d, want >= 1", q.Stat("cmw"))
	}
}

func TestCPUIntensiveDetection(t *testing.T) {
	q := mustAlloc(t, "cpuitsv", wq.PerCPU, 0)
	var otherRan, otherBeforeSpinner, spinnerDone atomic.Bool
	// The spinner burns CPU time (not wall time, which a loaded machine
	// stretches) until the item queued behind it has run and the pool has
	// counted it CPU-intensive, or 5 s of CPU. On a busy machine the item
	// behind it may start by a CM wake-up instead: the monitor sees the
	// spinner's thread asleep while it waits for a P (the runtime preempts
	// a goroutine every 10 ms, and a locked thread sleeps until its
	// goroutine is scheduled again), and each such sleep restarts the
	// spinner's CPU window. So the spinner does not stop at the other
	// item: it waits for the detection itself, which needs one window of
	// cpu_intensive_thresh (10 ms) of CPU seen without a sleep.
	q.QueueOn(0, wq.NewWork(func() {
		s := threadCPU()
		for spent := time.Duration(0); spent < 5*time.Second; spent = threadCPU() - s {
			if spent >= 40*time.Millisecond && otherRan.Load() && q.Stats().CPUItsv > 0 {
				break
			}
		}
		spinnerDone.Store(true)
	}))
	q.QueueOn(0, wq.NewWork(func() {
		otherBeforeSpinner.Store(!spinnerDone.Load())
		otherRan.Store(true)
	}))
	q.Flush()
	if got := q.Stat("cpuitsv"); got != 1 {
		t.Errorf("CPUitsv = %d, want 1", got)
	}
	if !otherRan.Load() {
		t.Fatal("second item never ran")
	}
	if !otherBeforeSpinner.Load() {
		t.Error("the item behind a CPU-intensive spinner waited for it to end")
	}
}

// TestUnboundConcurrencyManaged: an unbound pool runs at most as many
// CPU-bound items at once as its workers have CPUs (more would only hand
// Ps to each other), and a worker that blocks stops counting, so items
// that wait for each other all get to run. Neither half asserts a time:
// the first counts overlaps, the second would hang without the mechanism
// (bounded by a 30 s failure).
func TestUnboundConcurrencyManaged(t *testing.T) {
	// Thread workers: a queue at the process's own nice (19 below, in a
	// niced unprivileged process) would be goroutine-backed, and those
	// pools have no concurrency management.
	q := mustAlloc(t, "ub-cm", wq.Unbound, 0, wq.Threads())
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

// TestObsCMWakeup: a sleeping item on a per-CPU queue with another item
// queued behind it on the same CPU makes the pool wake another worker.
func TestObsCMWakeup(t *testing.T) {
	q := mustAlloc(t, "obs_cmw", wq.PerCPU, 0)
	release := make(chan struct{})
	var second atomic.Bool
	sleeper := wq.NewWork(func() { <-release })
	q.QueueOn(0, sleeper)
	waitFor(t, "the sleeper to start", func() bool { return sleeper.Busy()&wq.BusyRunning != 0 })
	q.QueueOn(0, wq.NewWork(func() { second.Store(true) }))
	waitFor(t, "the second item to start while the first sleeps", second.Load)
	close(release)
	q.Flush()
	st := q.Stats()
	if st.CMW < 1 {
		t.Errorf("CMW = %d, want >= 1", st.CMW)
	}
	if st.CPUItsv != 0 {
		t.Errorf("CPUitsv = %d for a sleeping item, want 0", st.CPUItsv)
	}
	if st.Total != 2 || st.Infl != 0 {
		t.Errorf("total %d infl %d", st.Total, st.Infl)
	}
}

// TestObsCPUIntensiveAndCPUTime: an item that burns 20 ms of CPU on a
// per-CPU queue is one CPU-intensive violation, and its CPU time is
// counted.
func TestObsCPUIntensiveAndCPUTime(t *testing.T) {
	obsCPUIntensiveThresh(t, 10*time.Millisecond)
	labsys.SetCPUAccounting(true) // the default
	q := mustAlloc(t, "obs_cpuitsv", wq.PerCPU, 0)
	// Spin until the monitor has marked the item CPU-intensive (it samples
	// every 1 ms but may be late on a loaded machine), for at most 5 s of
	// CPU; at least 20 ms.
	q.QueueOn(0, wq.NewWork(func() {
		obsSpinCPU(t, 20*time.Millisecond)
		for i := 0; i < 5000 && q.Stats().CPUItsv == 0; i++ {
			obsSpinCPU(t, time.Millisecond)
		}
	}))
	q.Flush()
	st := q.Stats()
	if st.CPUItsv != 1 {
		t.Errorf("CPUitsv = %d, want 1", st.CPUItsv)
	}
	// The spinner used at least 20 ms of its thread's CPU; the accounting
	// reads the same clock. 10 ms leaves room for any rounding.
	if st.CPUTime < 10*time.Millisecond {
		t.Errorf("CPUtime = %v, want >= 10ms", st.CPUTime)
	}
	if st.Exec.MaxNs < int64(10*time.Millisecond) {
		t.Errorf("execution time max %d ns, want >= 10 ms", st.Exec.MaxNs)
	}
}
