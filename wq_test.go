package wq_test

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// ants/v2 starts its default pool's goroutines at package init.
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"))
}

// waitFor polls cond for up to 10 s; generous so slow machines pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func mustAlloc(t *testing.T, name string, flags wq.Flags, maxActive int, opts ...wq.Option) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, maxActive, opts...)
	if err != nil {
		t.Fatalf("Alloc(%q, %v): %v", name, flags, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// captureErrors collects what the error handler reports during the test.
func captureErrors(t *testing.T) *errLog {
	l := &errLog{}
	wq.SetErrorHandler(func(op, fn string, err error) {
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
	})
	t.Cleanup(func() { wq.SetErrorHandler(nil) })
	return l
}

type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

func isRoot() bool { return os.Geteuid() == 0 }

func TestFlagsValidation(t *testing.T) {
	for _, f := range []wq.Flags{wq.PerCPU | wq.Unbound, wq.HighPri | wq.RT, 1 << 20} {
		if _, err := wq.Alloc("bad", f, 0); !errors.Is(err, wq.ErrInvalidFlags) {
			t.Errorf("Alloc(%v) err = %v, want ErrInvalidFlags", f, err)
		}
	}
	if _, err := wq.AllocOrdered("bad", wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
		t.Errorf("AllocOrdered(PerCPU) err = %v, want ErrInvalidFlags", err)
	}
}

func TestMaxActiveClamp(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, 1024}, {-5, 1}, {5000, 2048}, {16, 16}} {
		q := mustAlloc(t, "clamp", wq.Unbound, c.in)
		if got := q.MaxActive(); got != c.want {
			t.Errorf("Alloc max_active %d: MaxActive() = %d, want %d", c.in, got, c.want)
		}
	}
	q := mustAlloc(t, "clamp", wq.Unbound, 4)
	if err := q.SetMaxActive(0); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetMaxActive(0) = %v, want ErrInvalidArgument", err)
	}
	if q.MaxActive() != 4 {
		t.Errorf("failed SetMaxActive changed the value to %d", q.MaxActive())
	}
}

func TestQueueRunsAndReturns(t *testing.T) {
	q := mustAlloc(t, "basic", 0, 0)
	release := make(chan struct{})
	var runs atomic.Int32
	w := wq.NewWork(func() {
		runs.Add(1)
		<-release
	})
	if !q.Queue(w) {
		t.Fatal("first Queue returned false")
	}
	waitFor(t, "item to start", func() bool { return runs.Load() == 1 })
	// Running, not pending: queueing again is allowed.
	if !q.Queue(w) {
		t.Fatal("Queue while running returned false")
	}
	if q.Queue(w) {
		t.Fatal("Queue while pending returned true")
	}
	if b := w.Busy(); b != wq.BusyPending|wq.BusyRunning {
		t.Errorf("Busy() = %v, want pending|running", b)
	}
	close(release)
	waitFor(t, "second run", func() bool { return runs.Load() == 2 })
	if !w.Flush() && w.Busy() != 0 {
		t.Error("Flush returned false while the item was busy")
	}
	if w.Flush() {
		t.Error("Flush of an idle item returned true")
	}
}

func TestNonReentrance(t *testing.T) {
	q := mustAlloc(t, "reent", wq.Unbound, 0)
	var inside, overlaps, runs atomic.Int32
	var w *wq.Work
	w = wq.NewWork(func() {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		time.Sleep(100 * time.Microsecond)
		runs.Add(1)
		inside.Add(-1)
	})
	for i := 0; i < 2000; i++ {
		q.QueueOn(i%runtime.NumCPU(), w)
		if i%50 == 0 {
			runtime.Gosched()
		}
	}
	q.Flush()
	if overlaps.Load() != 0 {
		t.Fatalf("work item ran concurrently with itself %d times", overlaps.Load())
	}
	if runs.Load() == 0 {
		t.Fatal("never ran")
	}
}

func TestQueueOnRunsOnThatCPUWithKernelAttrs(t *testing.T) {
	cpus, _ := sched.Affinity(0)
	classes := []struct {
		flags wq.Flags
		nice  int
		pol   sched.Policy
		suf   string
	}{
		{wq.PerCPU, 0, sched.PolicyNormal, ""},
		{wq.PerCPU | wq.HighPri, -20, sched.PolicyNormal, "H"},
	}
	if !isRoot() {
		classes = classes[:1]
	}
	for _, c := range classes {
		q := mustAlloc(t, "on", c.flags, 0)
		for _, cpu := range cpus {
			var got atomic.Int32
			var tid atomic.Int32
			got.Store(-1)
			w := wq.NewWork(func() {
				got.Store(int32(wq.GetCPU()))
				tid.Store(int32(wq.Gettid()))
			})
			if !q.QueueOn(cpu, w) {
				t.Fatal("QueueOn returned false")
			}
			w.Flush()
			if int(got.Load()) != cpu {
				t.Errorf("%v: item queued on CPU %d ran on CPU %d", c.flags, cpu, got.Load())
			}
			aff, err := sched.Affinity(int(tid.Load()))
			if err != nil || !slices.Equal(aff, []int{cpu}) {
				t.Errorf("%v: worker tid %d affinity %v (%v), want [%d]", c.flags, tid.Load(), aff, err, cpu)
			}
			a, err := sched.GetAttr(int(tid.Load()))
			want := c.nice
			if c.nice == 0 && reachableNice(t, 0) != 0 {
				// Unprivileged and niced: the worker keeps the inherited
				// nice, and Stats says so.
				want = reachableNice(t, 0)
				if q.Stats().ClassError == "" {
					t.Errorf("%v: worker could not get nice 0, but Stats().ClassError is empty", c.flags)
				}
			}
			if err != nil || a.Nice != want || a.Policy != c.pol {
				t.Errorf("%v: worker attrs %+v (%v), want nice %d %v", c.flags, a, err, want, c.pol)
			}
			name, _ := sched.ThreadName(int(tid.Load()))
			if want := "kworker/"; len(name) < len(want) || name[:len(want)] != want || (c.suf != "" && name[len(name)-1:] != c.suf) {
				t.Errorf("%v: worker name %q, want kworker/%d:N%s", c.flags, name, cpu, c.suf)
			}
		}
	}
}

func TestQueueUsesCallerCPU(t *testing.T) {
	q := mustAlloc(t, "local", wq.PerCPU, 0)
	cpus, _ := sched.Affinity(0)
	for _, cpu := range cpus {
		done := make(chan [2]int)
		sched.GoLocked(func() {
			// This thread is pinned and then discarded (it exits locked).
			if err := sched.SetAffinity(0, []int{cpu}); err != nil {
				done <- [2]int{-1, -1}
				return
			}
			var ran atomic.Int32
			w := wq.NewWork(func() { ran.Store(int32(wq.GetCPU())) })
			q.Queue(w)
			w.Flush()
			done <- [2]int{cpu, int(ran.Load())}
		})
		r := <-done
		if r[0] != r[1] {
			t.Errorf("queued from CPU %d, ran on CPU %d", r[0], r[1])
		}
	}
}

func TestOrdered(t *testing.T) {
	q, err := wq.AllocOrdered("ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	var mu sync.Mutex
	var order []int
	var inside, overlaps atomic.Int32
	works := make([]*wq.Work, 200)
	for i := range works {
		works[i] = wq.NewWork(func() {
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			if i%7 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			inside.Add(-1)
		})
	}
	for i, w := range works {
		q.QueueOn(i%runtime.NumCPU(), w)
	}
	q.Flush()
	if overlaps.Load() != 0 {
		t.Errorf("ordered queue ran %d items concurrently", overlaps.Load())
	}
	if len(order) != len(works) {
		t.Fatalf("ran %d of %d", len(order), len(works))
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("order[%d] = %d, want %d", i, v, i)
		}
	}
}

// maxConcurrent runs n sleeping items and reports the peak concurrency.
func maxConcurrent(t *testing.T, q *wq.Workqueue, n int, queue func(w *wq.Work) bool) int32 {
	var cur, peak atomic.Int32
	works := make([]*wq.Work, n)
	for i := range works {
		works[i] = wq.NewWork(func() {
			c := cur.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			cur.Add(-1)
		})
	}
	for _, w := range works {
		if !queue(w) {
			t.Fatal("queue returned false")
		}
	}
	q.Flush()
	return peak.Load()
}

func TestMaxActivePerCPU(t *testing.T) {
	q := mustAlloc(t, "maxact", wq.PerCPU, 2)
	peak := maxConcurrent(t, q, 12, func(w *wq.Work) bool { return q.QueueOn(0, w) })
	if peak > 2 {
		t.Errorf("per-CPU max_active 2: peak concurrency on one CPU %d", peak)
	}
	if peak < 1 {
		t.Error("nothing ran")
	}
}

func TestMaxActiveUnbound(t *testing.T) {
	q := mustAlloc(t, "maxact-u", wq.Unbound, 3)
	peak := maxConcurrent(t, q, 15, q.Queue)
	if peak > 3 {
		t.Errorf("unbound max_active 3: peak %d", peak)
	}
	if peak < 2 {
		// Not a timing assertion: sleeping items on an unbound queue each
		// get a worker; with 15 queued at once at least 2 must overlap.
		t.Errorf("unbound queue never ran items in parallel (peak %d)", peak)
	}
	// Raising max_active lets more run.
	if err := q.SetMaxActive(6); err != nil {
		t.Fatal(err)
	}
	if q.Congested(0) {
		t.Error("Congested after flush")
	}
}

func TestCongested(t *testing.T) {
	q := mustAlloc(t, "cong", wq.PerCPU, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	a := wq.NewWork(func() { started <- struct{}{}; <-release })
	b := wq.NewWork(func() {})
	q.QueueOn(0, a)
	<-started
	q.QueueOn(0, b)
	if !q.Congested(0) {
		t.Error("Congested(0) = false with an item on the inactive list")
	}
	close(release)
	q.Flush()
	if q.Congested(0) {
		t.Error("Congested(0) = true after flush")
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

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func TestCPUIntensiveDetection(t *testing.T) {
	q := mustAlloc(t, "cpuitsv", wq.PerCPU, 0)
	var otherRan, otherBeforeSpinner, spinnerDone atomic.Bool
	// The spinner burns CPU time (not wall time, which a loaded machine
	// stretches) until the item queued behind it has run, or 2 s of CPU.
	// Only CPU-intensive detection lets that item start on this pool.
	q.QueueOn(0, wq.NewWork(func() {
		s := threadCPU()
		for (threadCPU()-s < 40*time.Millisecond || !otherRan.Load()) && threadCPU()-s < 2*time.Second {
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

func TestPanicRecovered(t *testing.T) {
	var got atomic.Pointer[wq.PanicInfo]
	wq.SetPanicHandler(func(pi wq.PanicInfo) { got.Store(&pi) })
	defer wq.SetPanicHandler(nil)
	q := mustAlloc(t, "panic", wq.PerCPU, 0)
	w := wq.NewWork(boom)
	q.QueueOn(0, w)
	w.Flush()
	pi := got.Load()
	if pi == nil {
		t.Fatal("panic handler not called")
	}
	if pi.Value != "boom" || pi.Workqueue != "panic" || pi.Func != "github.com/gowq/wq_test.boom" || len(pi.Stack) == 0 {
		t.Errorf("PanicInfo = %+v", *pi)
	}
	// The pool still serves.
	var ok atomic.Bool
	w2 := wq.NewWork(func() { ok.Store(true) })
	q.QueueOn(0, w2)
	w2.Flush()
	if !ok.Load() {
		t.Error("worker did not keep serving after a panic")
	}
	if q.Stat("completed") != 2 {
		t.Errorf("completed = %d, want 2 (a panicking item counts as completed)", q.Stat("completed"))
	}
}

func boom() { panic("boom") }

func TestGoexitSurvives(t *testing.T) {
	errs := captureErrors(t)
	_ = errs
	q := mustAlloc(t, "goexit", wq.PerCPU, 0)
	w := wq.NewWork(func() { runtime.Goexit() })
	q.QueueOn(0, w)
	w.Flush()
	var ok atomic.Bool
	w2 := wq.NewWork(func() { ok.Store(true) })
	q.QueueOn(0, w2)
	w2.Flush()
	if !ok.Load() {
		t.Error("pool stalled after runtime.Goexit in a work function")
	}
}

func TestCancel(t *testing.T) {
	q := mustAlloc(t, "cancel", wq.PerCPU, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	blocker := wq.NewWork(func() { started <- struct{}{}; <-release })
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	q.QueueOn(0, blocker)
	<-started
	q.QueueOn(0, w) // inactive behind max_active 1
	if !w.Cancel() {
		t.Error("Cancel of a pending item returned false")
	}
	if w.Cancel() {
		t.Error("Cancel of an idle item returned true")
	}
	if w.Pending() {
		t.Error("still pending after Cancel")
	}
	// CancelSync waits for the running instance.
	done := make(chan bool)
	go func() { done <- blocker.CancelSync() }()
	select {
	case <-done:
		t.Fatal("CancelSync returned while the item was running")
	case <-time.After(20 * time.Millisecond):
	}
	if q.Queue(blocker) {
		t.Error("Queue during CancelSync returned true")
	}
	close(release)
	if <-done {
		t.Error("CancelSync of a running, not pending item returned true")
	}
	q.Flush()
	if ran.Load() {
		t.Error("cancelled item ran")
	}
}

func TestDisableEnable(t *testing.T) {
	q := mustAlloc(t, "disable", wq.PerCPU, 0)
	var runs atomic.Int32
	w := wq.NewWork(func() { runs.Add(1) })
	if w.Disable() {
		t.Error("Disable of an idle item returned true")
	}
	w.Disable()
	if q.Queue(w) {
		t.Error("Queue of a disabled item returned true")
	}
	if w.Enable() {
		t.Error("Enable returned true with count 2 -> 1")
	}
	if !w.Enable() {
		t.Error("Enable returned false with count 1 -> 0")
	}
	if !q.Queue(w) {
		t.Error("Queue after Enable returned false")
	}
	w.Flush()
	if runs.Load() != 1 {
		t.Errorf("runs = %d, want 1", runs.Load())
	}
}

func TestDelayed(t *testing.T) {
	q := mustAlloc(t, "delayed", wq.Unbound, 0)
	var runs atomic.Int32
	dw := wq.NewDelayedWork(func() { runs.Add(1) })
	if !q.QueueDelayed(dw, time.Hour) {
		t.Fatal("QueueDelayed returned false")
	}
	if q.QueueDelayed(dw, time.Hour) {
		t.Error("QueueDelayed of a pending item returned true")
	}
	if !q.ModDelayed(dw, time.Hour) {
		t.Error("ModDelayed of a pending item returned false")
	}
	// flush_delayed_work queues a pending timer at once and waits.
	if !dw.Flush() {
		t.Error("Flush of an armed delayed item returned false")
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d after Flush, want 1", runs.Load())
	}
	if q.ModDelayed(dw, time.Millisecond) {
		t.Error("ModDelayed of an idle item returned true")
	}
	waitFor(t, "delayed run", func() bool { return runs.Load() == 2 })
	q.QueueDelayed(dw, time.Hour)
	if !dw.Cancel() {
		t.Error("Cancel of an armed delayed item returned false")
	}
	if dw.Pending() {
		t.Error("pending after Cancel")
	}
	q.QueueDelayed(dw, time.Hour)
	if !dw.CancelSync() {
		t.Error("CancelSync of an armed delayed item returned false")
	}
	if runs.Load() != 2 {
		t.Errorf("runs = %d, want 2", runs.Load())
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

func TestFreezer(t *testing.T) {
	q := mustAlloc(t, "freeze", wq.Unbound|wq.Freezable, 0)
	wq.FreezeAll()
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	q.Queue(w)
	time.Sleep(20 * time.Millisecond)
	if ran.Load() {
		t.Fatal("item started while frozen")
	}
	if !w.Pending() {
		t.Fatal("item lost while frozen")
	}
	wq.ThawAll()
	w.Flush()
	if !ran.Load() {
		t.Fatal("item did not run after thaw")
	}
}

func TestRescuer(t *testing.T) {
	q := mustAlloc(t, "reclaim", wq.PerCPU|wq.MemReclaim, 0)
	// Start the pool's workers, then forbid new ones.
	q.QueueOn(0, wq.NewWork(func() {}))
	q.Flush()
	wq.SetCreateWorkerHook(func() error { return errors.New("injected: no memory") })
	defer wq.SetCreateWorkerHook(nil)
	// Occupy every existing worker with a blocking item.
	all, _ := q.NumWorkers(0)
	release := make(chan struct{})
	for i := 0; i < all; i++ {
		q.QueueOn(0, wq.NewWork(func() { <-release }))
	}
	var rescued atomic.Bool
	w := wq.NewWork(func() { rescued.Store(true) })
	q.QueueOn(0, w)
	waitFor(t, "rescuer to run the stuck item", rescued.Load)
	if q.Stat("mayday") < 1 || q.Stat("rescued") < 1 {
		t.Errorf("mayday %d rescued %d, want >= 1", q.Stat("mayday"), q.Stat("rescued"))
	}
	close(release)
	wq.SetCreateWorkerHook(nil)
	q.Flush()
}

func TestIdleReap(t *testing.T) {
	if err := wq.SetIdleTimeout(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer wq.SetIdleTimeout(300 * time.Second)
	q := mustAlloc(t, "reap", wq.Unbound, 0)
	release := make(chan struct{})
	for i := 0; i < 8; i++ {
		q.Queue(wq.NewWork(func() { <-release }))
	}
	waitFor(t, "8 workers", func() bool { a, i := q.NumWorkers(0); return a-i >= 8 })
	close(release)
	q.Flush()
	waitFor(t, "idle workers to be reaped down to 2", func() bool { a, _ := q.NumWorkers(0); return a == 2 })
}

func TestZeroAllocQueue(t *testing.T) {
	q := mustAlloc(t, "alloc", wq.PerCPU, 0)
	w := wq.NewWork(func() {})
	q.QueueOn(0, w)
	w.Flush()
	idle := func() {
		for w.Busy() != 0 {
			runtime.Gosched()
		}
	}
	for _, c := range []struct {
		name  string
		queue func() bool
	}{
		{"Queue", func() bool { return q.Queue(w) }},
		{"QueueOn", func() bool { return q.QueueOn(0, w) }},
		{"Queue while pending", func() bool { q.Queue(w); return true }},
	} {
		// Waiting for idle with Busy does not allocate; Flush would.
		// AllocsPerRun counts the whole process's allocations, so a
		// background goroutine (the CM monitor, a timer, the race
		// detector's) can add some: the least of three runs is taken.
		allocs := 1e9
		for range 3 {
			allocs = min(allocs, testing.AllocsPerRun(500, func() {
				idle()
				if !c.queue() {
					t.Fatal("queue returned false on an idle item")
				}
			}))
		}
		if allocs > 0 {
			t.Errorf("%s: %.2f allocs/op, want 0", c.name, allocs)
		}
	}
	idle()
}

func TestUnboundPoolsShared(t *testing.T) {
	a := mustAlloc(t, "share-a", wq.Unbound, 0)
	b := mustAlloc(t, "share-b", wq.Unbound, 0)
	if !slices.Equal(a.PoolIDs(), b.PoolIDs()) {
		t.Errorf("queues with equal attributes use pools %v and %v, want the same", a.PoolIDs(), b.PoolIDs())
	}
	nice := reachableNice(t, 5) // 5, or 19 in a niced unprivileged process
	if nice == 0 {
		nice = 19
	}
	if err := b.SetNice(nice); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.PoolIDs(), b.PoolIDs()) {
		t.Errorf("queues with different nice share pools %v", a.PoolIDs())
	}
	if got, _ := b.Attr("nice"); got != strconv.Itoa(nice) {
		t.Errorf("nice attr %q, want %d", got, nice)
	}
	var tid atomic.Int32
	w := wq.NewWork(func() { tid.Store(int32(wq.Gettid())) })
	b.Queue(w)
	w.Flush()
	if a, _ := sched.GetAttr(int(tid.Load())); a.Nice != nice {
		t.Errorf("worker of the nice %d queue runs at nice %d", nice, a.Nice)
	}
}

// TestFlushQueueFromOwnItem: Flush and Drain of a queue from one of its own
// items would wait for themselves; they return ErrDeadlock at once.
func TestFlushQueueFromOwnItem(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "selfflush", wq.Unbound, 0)
	got := make(chan [2]error, 1)
	w := wq.NewWork(func() {
		got <- [2]error{q.FlushContext(t.Context()), q.DrainContext(t.Context())}
	})
	q.Queue(w)
	select {
	case r := <-got:
		for _, err := range r {
			if !errors.Is(err, wq.ErrDeadlock) {
				t.Errorf("flush/drain from own item = %v, want ErrDeadlock", err)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush from the queue's own item hung")
	}
	q.Flush()
	if errs.count(wq.ErrDeadlock) != 2 {
		t.Errorf("ErrDeadlock reported %d times, want 2", errs.count(wq.ErrDeadlock))
	}
	if err := wq.SetGlobalAttr("cpumask", "0"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf(`SetGlobalAttr("cpumask", "0") = %v, want ErrInvalidArgument`, err)
	}
}

// TestNonStrictStartsInPod: with the cpu scope and strict off, each pod's
// workers may run on every CPU, but each item starts inside its pod; a
// worker found outside is moved back and counted as a repatriation (RPR).
func TestNonStrictStartsInPod(t *testing.T) {
	cpus := wq.OnlineCPUs()
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs")
	}
	q := mustAlloc(t, "nonstrict", wq.Unbound, 0, wq.Threads()) // repatriation moves threads
	if err := q.SetAffinityScope(wq.ScopeCPU); err != nil {
		t.Fatal(err)
	}
	if err := q.SetAffinityStrict(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		cpu := cpus[i%len(cpus)]
		var ran atomic.Int32
		ran.Store(-1)
		var tid atomic.Int32
		w := wq.NewWork(func() { ran.Store(int32(wq.GetCPU())); tid.Store(int32(wq.Gettid())) })
		q.QueueOn(cpu, w)
		w.Flush()
		if int(ran.Load()) != cpu {
			t.Fatalf("item for the pod of CPU %d started on CPU %d", cpu, ran.Load())
		}
		// Non-strict: the worker may leave the pod afterwards.
		if aff, _ := sched.Affinity(int(tid.Load())); len(aff) != len(cpus) {
			t.Fatalf("non-strict worker affinity %v, want all CPUs %v", aff, cpus)
		}
		// Push the worker out of its pod now and then, so that the next
		// item needs a repatriation.
		if i%10 == 0 {
			_ = sched.SetAffinity(int(tid.Load()), []int{cpus[(i+1)%len(cpus)]})
			_ = sched.SetAffinity(int(tid.Load()), cpus)
		}
	}
	t.Logf("RPR %d", q.Stats().RPR)
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

// reachableNice returns want if a new thread of this process can take nice
// want, else the lowest nice it can take (a niced unprivileged process
// may not lower its threads' nice).
func reachableNice(t *testing.T, want int) int {
	t.Helper()
	for n := want; n <= 19; n++ {
		if sched.Probe(nil, &sched.Attr{Policy: sched.PolicyNormal, Nice: n}) == nil {
			return n
		}
	}
	t.Fatal("no nice value can be set")
	return 0
}
