package wq_test

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqtrace"
)

// The default unbound and ordered queues run their items on plain
// goroutines (not locked to a thread), with goroutine workers named
// gworker and tid 0 in Pools. Catches a default queue left on threads, or
// a goroutine worker that took a thread for itself.
func TestDefaultQueuesAreGoroutineBacked(t *testing.T) {
	defer wq.ForceThreads(false)()
	for _, tc := range []struct {
		name string
		q    func() (*wq.Workqueue, error)
	}{
		{"unbound", func() (*wq.Workqueue, error) { return wq.Alloc("gp-unbound", wq.Unbound, 0) }},
		{"ordered", func() (*wq.Workqueue, error) { return wq.AllocOrdered("gp-ordered", 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := tc.q()
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			if !q.GoroutineBacked() {
				t.Fatal("GoroutineBacked() = false for a default queue")
			}
			if locked, _ := ranOn(t, q); locked {
				t.Error("the item's goroutine is locked to its thread")
			}
			seen := false
			for _, p := range wq.Pools() {
				if p.ID != q.PoolIDs()[0] {
					continue
				}
				if !p.Goroutines {
					t.Errorf("pool %d: Goroutines = false", p.ID)
				}
				for _, wi := range p.Workers {
					seen = true
					if wi.TID != 0 || wi.CPU != -1 || !strings.HasPrefix(wi.Name, "gworker/") {
						t.Errorf("goroutine worker shown as %+v, want tid 0, cpu -1, a gworker name", wi)
					}
				}
			}
			if !seen {
				t.Error("no worker of the queue's pool in Pools()")
			}
		})
	}
}

// Threads() and GOWQ_THREADS put a default-attribute queue on locked
// worker threads. Catches an opt-out that is ignored.
func TestThreadsOptionGivesThreadWorkers(t *testing.T) {
	defer wq.ForceThreads(false)()
	q := mustAlloc(t, "gp-threads", wq.Unbound, 0, wq.Threads())
	if q.GoroutineBacked() {
		t.Fatal("GoroutineBacked() = true with Threads()")
	}
	if locked, _ := ranOn(t, q); !locked {
		t.Error("a Threads() queue ran its item on an unlocked goroutine")
	}
	undo := wq.ForceThreads(true)
	q2 := mustAlloc(t, "gp-forced", wq.Unbound, 0)
	undo()
	if q2.GoroutineBacked() {
		t.Fatal("GoroutineBacked() = true with threads forced")
	}
	if locked, _ := ranOn(t, q2); !locked {
		t.Error("a queue allocated with threads forced ran its item on an unlocked goroutine")
	}
}

// Only the process's own attributes give goroutine workers; an attribute
// change moves the queue to a thread-backed pool and a change back moves
// it back, and items run at every step. Catches a key that ignores the
// attributes, or a queue stranded on the wrong kind of pool.
func TestAttributeChangesMoveBetweenGoroutinesAndThreads(t *testing.T) {
	defer wq.ForceThreads(false)()
	for _, tc := range []struct {
		name  string
		flags wq.Flags
	}{{"per-cpu", wq.PerCPU}, {"highpri", wq.Unbound | wq.HighPri}} {
		q, err := wq.Alloc("gp-"+tc.name, tc.flags, 0)
		if errors.Is(err, wq.ErrPermission) {
			continue // highpri needs CAP_SYS_NICE
		}
		if err != nil {
			t.Fatal(err)
		}
		if q.GoroutineBacked() {
			t.Errorf("%s queue is goroutine-backed", tc.name)
		}
		q.Destroy()
	}
	q := mustAlloc(t, "gp-attrs", wq.Unbound, 0)
	check := func(step string, want bool) {
		t.Helper()
		if got := q.GoroutineBacked(); got != want {
			t.Fatalf("%s: GoroutineBacked() = %v, want %v", step, got, want)
		}
		if locked, _ := ranOn(t, q); locked == want {
			t.Fatalf("%s: item ran locked=%v, want %v", step, locked, !want)
		}
	}
	check("default", true)
	if err := q.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}
	check("strict", false)
	if err := q.SetAffinityStrict(false); err != nil {
		t.Fatal(err)
	}
	check("not strict again", true)
	if err := q.SetNice(5); err != nil {
		t.Logf("SetNice(5): %v: nice steps not checked", err) // a process niced above 5 may not
	} else {
		check("nice 5", false)
		if err := q.SetNice(0); err != nil {
			t.Fatal(err)
		}
		check("nice 0 again", true)
	}
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		return
	}
	if err := q.SetCPUMask(online[:1]); err != nil {
		t.Fatal(err)
	}
	check("one CPU", false)
	if err := q.SetCPUMask(online); err != nil {
		t.Fatal(err)
	}
	check("every CPU again", true)
}

// A goroutine worker knows itself: Flush of its own queue and CancelSync
// or Flush of its own item from inside the item return ErrDeadlock instead
// of waiting forever. Catches identity checks that only know tids.
func TestGoroutineWorkerDetectsSelfWait(t *testing.T) {
	defer wq.ForceThreads(false)()
	captureErrors(t)
	q := mustAlloc(t, "gp-self", wq.Unbound, 0)
	var errs [2]error
	var flushed bool
	var w *wq.Work
	done := make(chan struct{})
	w = wq.NewWork(func() {
		defer close(done)
		errs[0] = q.FlushContext(t.Context())
		flushed, errs[1] = w.FlushContext(t.Context())
	})
	q.Queue(w)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an item waiting for itself hung")
	}
	if !errors.Is(errs[0], wq.ErrDeadlock) || !errors.Is(errs[1], wq.ErrDeadlock) || flushed {
		t.Fatalf("self-waits returned %v, (%v, %v); want ErrDeadlock twice", errs[0], flushed, errs[1])
	}
}

// runtime.Goexit in a work function ends the goroutine worker through the
// shared exit path: the item completes, it is reported, a new worker
// serves the next item. runtime.UnlockOSThread and LockOSThread in an item
// do not disturb the worker. Catches a goroutine worker whose exit path
// leaks the item or the worker count.
func TestGoroutineWorkerGoexitAndThreadCalls(t *testing.T) {
	// The exit report is rate-limited process-wide: without this, an exit
	// reported by an earlier test within the interval hides this one.
	defer wq.SetExitReportEvery(time.Nanosecond)()
	defer wq.ForceThreads(false)()
	errs := captureErrors(t)
	q := mustAlloc(t, "gp-goexit", wq.Unbound, 0)
	w := wq.NewWork(func() { runtime.Goexit() })
	q.Queue(w)
	w.Flush()
	lock := wq.NewWork(func() {
		runtime.UnlockOSThread()
		runtime.LockOSThread()
		runtime.UnlockOSThread()
	})
	q.Queue(lock)
	lock.Flush()
	var ran atomic.Bool
	q.Queue(wq.NewWork(func() { ran.Store(true) }))
	q.Flush()
	if !ran.Load() {
		t.Fatal("no item ran after a worker's runtime.Goexit")
	}
	waitFor(t, "worker exit report", func() bool {
		errs.mu.Lock()
		defer errs.mu.Unlock()
		for _, e := range errs.errs {
			if errors.Is(e, wq.ErrWorkerExit) {
				return true
			}
		}
		return false
	})
	if s := q.Stats(); s.Total != 3 {
		t.Fatalf("Total = %d, want 3", s.Total)
	}
}

// Without a CM monitor, a goroutine-backed pool runs every pending item at
// once: 64 items that all wait for each other complete. Catches a
// concurrency limit (an item that blocks would hold back the rest
// forever, since nothing sees it block).
func TestGoroutinePoolRunsBlockedItemsConcurrently(t *testing.T) {
	defer wq.ForceThreads(false)()
	q := mustAlloc(t, "gp-blocking", wq.Unbound, 0)
	const n = 64
	var wg sync.WaitGroup
	wg.Add(n)
	release := make(chan struct{})
	items := make([]*wq.Work, n)
	for i := range items {
		items[i] = wq.NewWork(func() {
			wg.Done()
			<-release
		})
		q.Queue(items[i])
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("not every blocked item was started")
	}
	close(release)
	q.Flush()
}

// Goroutine workers are not charged CPU time (Stats().CPUTime stays 0)
// while the exec-time histogram still counts; thread workers are charged.
// Catches a goroutine worker reading its thread's CPU clock, which counts
// other goroutines' time.
func TestGoroutinePoolCPUAccounting(t *testing.T) {
	defer wq.ForceThreads(false)()
	labsys.SetCPUAccounting(true) // the default
	spin := func() {
		c0 := sched.SelfCPUTime()
		for sched.SelfCPUTime()-c0 < int64(2*time.Millisecond) {
		}
	}
	g := mustAlloc(t, "gp-cpu", wq.Unbound, 0)
	th := mustAlloc(t, "gp-cpu-threads", wq.Unbound, 0, wq.Threads())
	for _, q := range []*wq.Workqueue{g, th} {
		q.Queue(wq.NewWork(spin))
		q.Flush()
	}
	if s := g.Stats(); s.CPUTime != 0 || s.Total != 1 {
		t.Errorf("goroutine-backed: CPUTime %v, Total %d; want 0, 1", s.CPUTime, s.Total)
	}
	if s := th.Stats(); s.CPUTime < time.Millisecond {
		t.Errorf("thread-backed: CPUTime %v, want at least 1ms", s.CPUTime)
	}
}

type tidTracer struct {
	mu    sync.Mutex
	start []wqtrace.Event
}

func (tt *tidTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind == wqtrace.ExecuteStart && strings.HasPrefix(ev.Workqueue, "gp-trace") {
		tt.mu.Lock()
		tt.start = append(tt.start, *ev)
		tt.mu.Unlock()
	}
}

// A tracer's execute events from a goroutine worker carry tid 0 and the
// gworker name; from a thread worker its tid and the kworker name.
// Catches events that show a tid no worker owns.
func TestGoroutineWorkerTraceTid(t *testing.T) {
	defer wq.ForceThreads(false)()
	tt := &tidTracer{}
	wq.SetTracer(tt)
	defer wq.SetTracer(nil)
	g := mustAlloc(t, "gp-trace-g", wq.Unbound, 0)
	th := mustAlloc(t, "gp-trace-t", wq.Unbound, 0, wq.Threads())
	for _, q := range []*wq.Workqueue{g, th} {
		w := wq.NewWork(func() {})
		q.Queue(w)
		w.Flush()
	}
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if len(tt.start) != 2 {
		t.Fatalf("%d execute_start events, want 2", len(tt.start))
	}
	for _, ev := range tt.start {
		goro := ev.Workqueue == "gp-trace-g"
		if goro && (ev.TID != 0 || !strings.HasPrefix(ev.Comm, "gworker/")) {
			t.Errorf("goroutine worker event: tid %d comm %q", ev.TID, ev.Comm)
		}
		if !goro && (ev.TID == 0 || !strings.HasPrefix(ev.Comm, "kworker/")) {
			t.Errorf("thread worker event: tid %d comm %q", ev.TID, ev.Comm)
		}
	}
}

// BenchmarkRingUnbound queues empty items back to back through a ring of
// 64 on an unbound queue, as the lab's throughput scenario does.
func BenchmarkRingUnbound(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []wq.Option
	}{{"default", nil}, {"threads", []wq.Option{wq.Threads()}}} {
		b.Run(tc.name, func(b *testing.B) {
			q, err := wq.Alloc("bench-ring", wq.Unbound, 0, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			var n atomic.Int64
			ring := make([]*wq.Work, 64)
			for i := range ring {
				ring[i] = wq.NewWork(func() { n.Add(1) })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i, queued := 0, 0; queued < b.N; i++ {
				if q.Queue(ring[i%len(ring)]) {
					queued++
				} else {
					runtime.Gosched() // as the lab's producer: the ring's next item is pending
				}
			}
			q.Flush()
		})
	}
}

// Goroutine workers never take items lock-free (docs/design.md, "The wake
// path"): every queue call of a goroutine-backed queue takes the pool
// lock, so Stats().Pushed stays 0 through a back-to-back ring. Catches a
// goroutine worker counted as a scanner, whose bookkeeping costs more
// than the lock it saves.
func TestGoroutineWorkersTakeNoPushedItems(t *testing.T) {
	defer wq.ForceThreads(false)()
	q, err := wq.Alloc("gp-nopush", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	if !q.GoroutineBacked() {
		t.Fatal("GoroutineBacked() = false for a default queue")
	}
	var n atomic.Int64
	ring := make([]*wq.Work, 64)
	for i := range ring {
		ring[i] = wq.NewWork(func() { n.Add(1) })
	}
	const items = 20000
	for i, queued := 0, 0; queued < items; i++ {
		if q.Queue(ring[i%len(ring)]) {
			queued++
		} else {
			runtime.Gosched()
		}
	}
	q.Flush()
	if got := n.Load(); got != items {
		t.Fatalf("%d items ran, want %d", got, items)
	}
	if st := q.Stats(); st.Pushed != 0 {
		t.Errorf("Stats().Pushed = %d on a goroutine-backed queue, want 0", st.Pushed)
	}
}

// BenchmarkBlockingBurst queues bursts of 1000 items that each sleep 1 ms
// (time.Sleep) on a fresh goroutine-backed queue ("cold"), flushes, and
// again on the same queue ("warm": its workers are idle goroutines now),
// against 1000 go statements and a WaitGroup in the same run; ms/burst
// for each, and x-go for cold and warm (the lab's blocking scenario, in a
// benchmark).
func BenchmarkBlockingBurst(b *testing.B) {
	const n = 1000
	item := func() { time.Sleep(time.Millisecond) }
	var cold, warm, gg time.Duration
	burst := func(q *wq.Workqueue, works []*wq.Work) time.Duration {
		t0 := time.Now()
		for _, w := range works {
			q.Queue(w)
		}
		q.Flush()
		return time.Since(t0)
	}
	for i := 0; i < b.N; i++ {
		q, err := wq.Alloc("bench-burst", wq.Unbound, 0)
		if err != nil {
			b.Fatal(err)
		}
		works := make([]*wq.Work, n)
		for k := range works {
			works[k] = wq.NewWork(item)
		}
		cold += burst(q, works)
		warm += burst(q, works)
		q.Destroy()

		var wg sync.WaitGroup
		t0 := time.Now()
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); item() }()
		}
		wg.Wait()
		gg += time.Since(t0)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
	b.ReportMetric(ms(cold), "cold-ms/burst")
	b.ReportMetric(ms(warm), "warm-ms/burst")
	b.ReportMetric(ms(gg), "go-ms/burst")
	b.ReportMetric(float64(cold)/float64(gg), "cold-x-go")
	b.ReportMetric(float64(warm)/float64(gg), "warm-x-go")
}

// nicedQueueItems runs n items on q and returns the nices they ran at.
func nicedQueueItems(t *testing.T, q *wq.Workqueue, n int) []int {
	var mu sync.Mutex
	var got []int
	for range n {
		q.Queue(wq.NewWork(func() {
			a, err := sched.GetAttr(0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, a.Nice)
			mu.Unlock()
			time.Sleep(time.Millisecond) // several threads, not one
		}))
	}
	mustReturn(t, "Flush", q.Flush)
	return got
}

// After renice -p of the process (which changes its main thread only), a
// queue set to the main thread's nice is thread-backed, and every item
// runs at that nice. Before, it was judged to have "the process's
// attributes" and put on goroutines, and most items ran at the other
// threads' nice.
func TestNicedQueueAfterMainThreadRenice(t *testing.T) {
	if !inAttrChild() {
		attrChild(t, "TestNicedQueueAfterMainThreadRenice", false, nil, "")
		return
	}
	main, err := sched.GetAttr(os.Getpid())
	if err != nil || main.Policy != sched.PolicyNormal {
		t.Skipf("main thread: %+v, %v", main, err)
	}
	target := min(main.Nice+5, 19)
	if target == main.Nice || target == 0 {
		t.Skipf("the process runs at nice %d: no higher nice to renice to", main.Nice)
	}
	q := mustAlloc(t, "niced-renice", wq.Unbound, 0)
	nicedQueueItems(t, q, 4) // runtime threads exist before the renice
	if err := sched.SetAttr(os.Getpid(), sched.Attr{Policy: sched.PolicyNormal, Nice: target}); err != nil {
		t.Skipf("renice of the main thread: %v", err)
	}
	if err := q.SetNice(target); err != nil {
		t.Fatal(err)
	}
	if q.GoroutineBacked() {
		t.Errorf("a queue at nice %d, the main thread's only, is goroutine-backed", target)
	}
	for _, n := range nicedQueueItems(t, q, 12) {
		if n != target {
			t.Fatalf("an item ran at nice %d, want the queue's %d", n, target)
		}
	}
}

// In a process started with nice -n 5 (every thread at that nice), a
// queue set to that nice is goroutine-backed, and its items run at it.
func TestNicedQueueInNicedProcess(t *testing.T) {
	if !inAttrChild() {
		attrChild(t, "TestNicedQueueInNicedProcess", false, []string{"nice", "-n", "5"}, "")
		return
	}
	main, err := sched.GetAttr(os.Getpid())
	if err != nil || main.Policy != sched.PolicyNormal || main.Nice == 0 {
		t.Skipf("main thread: %+v, %v (want a niced process)", main, err)
	}
	q := mustAlloc(t, "niced-process", wq.Unbound, 0)
	if err := q.SetNice(main.Nice); err != nil {
		t.Fatal(err)
	}
	threads := os.Getenv("GOWQ_THREADS") != "" && os.Getenv("GOWQ_THREADS") != "0" // every pool on threads
	if !threads && !q.GoroutineBacked() {
		t.Errorf("a queue at the nice %d of every thread of the process is not goroutine-backed", main.Nice)
	}
	for _, n := range nicedQueueItems(t, q, 12) {
		if n != main.Nice {
			t.Fatalf("an item ran at nice %d, want %d", n, main.Nice)
		}
	}
}

// A table install judges once whether the queue is goroutine-backed, for
// all its pools: the runtime threads' nices may change between two reads
// (a thread reniced or starting), and the pods were chosen on the first
// read while each pool was keyed on a read of its own.
func TestGoroutineBackedJudgedOncePerInstall(t *testing.T) {
	if os.Getenv("GOWQ_THREADS") != "" {
		t.Skip("GOWQ_THREADS set: no queue is goroutine-backed")
	}
	q := mustAlloc(t, "gopool-judged-once", wq.Unbound, 0)
	nice := reachableNice(t, 7)
	var reads atomic.Int32
	// The first read finds every thread at the queue's nice, the later
	// ones find them differing.
	restore := wq.SetRuntimeNice(func() (int, bool) {
		if reads.Add(1) == 1 {
			return nice, true
		}
		return 0, false
	})
	defer restore()
	if err := q.SetNice(nice); err != nil {
		t.Fatal(err)
	}
	if reads.Load() == 0 {
		t.Fatal("the install did not read the threads' nice: nothing was tested")
	}
	got := wq.PoolsGoroutineBacked(q)
	for _, g := range got {
		if !g {
			t.Fatalf("pools goroutine-backed %v after an install whose first read was uniform (%d reads): want all true", got, reads.Load())
		}
	}
	w := wq.NewWork(func() {})
	q.Queue(w)
	mustReturn(t, "Flush", func() { w.Flush() })
}
