package wq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/timer"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/wqtrace"
)

// Thread creation near a real thread limit, in a child process (see
// helpers_test.go for the harness): every thread gowq starts goes through
// the thread gate, which refuses with ErrThreadLimit; nothing may abort
// the process with "pthread_create failed".

// TestThreadGateUnderRealLimit: under a pids cgroup's pids.max (and
// RLIMIT_NPROC) a few threads above use, set a moment after a reading
// that left plenty of room:
//   - 16 MemReclaim queues whose pool cannot create workers each get one
//     item, and each item runs (their rescuers need no new thread);
//   - Alloc of another MemReclaim queue, kthread.CreateWorker and an RT
//     timer base are refused (ErrThreadLimit, or a Go timer) instead of
//     creating a thread.
//
// Catches a lazily started rescuer, a thread creation that bypasses the
// gate (the child then dies in pthread_create), and a headroom reading
// trusted from a cache after the limit was tightened.
func TestThreadGateUnderRealLimit(t *testing.T) {
	switch os.Getenv(limitChildEnv) {
	case "gate":
		gateLimitChild(false)
		return
	case "gate-settled":
		gateLimitChild(true)
		return
	}
	for _, k := range limitKinds {
		// "settled": the child waits past any one-second cache of its
		// last reading before it creates threads, so that each creator
		// meets the limit with a fresh reading.
		for _, mode := range []string{"gate", "gate-settled"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) {
				gateLimitRun(t, k.name, k.start, mode)
			})
		}
	}
}

func gateLimitRun(t *testing.T, name string, start func(t *testing.T, test, mode string) (*exec.Cmd, func(pid int) error), mode string) {
	cmd, limit := start(t, "TestThreadGateUnderRealLimit", mode)
	out := runLimited(t, cmd, limit)
	if strings.Contains(out, "failed to create new OS thread") || strings.Contains(out, "pthread_create failed") {
		t.Fatalf("the child aborted at the %s limit: a thread was created past the gate:\n%s", name, head(out, 40))
	}
	if !strings.Contains(out, "LIMIT-CHILD-OK") {
		t.Fatalf("child under %s:\n%s", name, out)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "gate:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func gateLimitChild(settle bool) {
	var mu sync.Mutex
	var limitErrs []string
	wq.SetErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrThreadLimit) {
			mu.Lock()
			limitErrs = append(limitErrs, op+": "+err.Error())
			mu.Unlock()
		}
	})
	defer wq.SetErrorHandler(nil)
	// Thread workers: a default unbound queue is goroutine-backed, and its
	// blocked items would never need a thread the gate could refuse.
	blocker, err := wq.Alloc("gate-block", wq.Unbound, 512, wq.Threads())
	if err != nil {
		childFail("Alloc: %v", err)
	}
	const nReclaim = 16
	var reclaim []*wq.Workqueue
	for i := range nReclaim {
		q, err := wq.Alloc(fmt.Sprintf("gate-reclaim%d", i), wq.Unbound|wq.MemReclaim, 8, wq.Threads())
		if err != nil {
			childFail("Alloc MemReclaim %d: %v", i, err)
		}
		reclaim = append(reclaim, q)
	}
	// A reading with plenty of room just before the limit is set: the
	// pool's first worker, and a check.
	warm := make(chan struct{})
	blocker.Queue(wq.NewWork(func() { close(warm) }))
	<-warm
	if err := wq.CheckThreadHeadroom(); err != nil {
		childFail("before the limit: %v", err)
	}
	childReady()
	if settle {
		time.Sleep(1100 * time.Millisecond)
	}

	// Block workers until the pool cannot create more.
	release := make(chan struct{})
	var done atomic.Int64
	queued := 0
	for i := 0; ; i++ {
		mu.Lock()
		n := len(limitErrs)
		mu.Unlock()
		if n > 0 {
			break
		}
		if i > 400 {
			childFail("no ErrThreadLimit after %d blocking items", queued)
		}
		if !blocker.Queue(wq.NewWork(func() { <-release; done.Add(1) })) {
			childFail("Queue of blocking item %d refused", i)
		}
		queued++
		time.Sleep(2 * time.Millisecond) // let the pool create a worker for it
	}
	fmt.Println("phase: the pool is at the limit")
	// Each MemReclaim queue gets one item while its pool cannot create
	// workers.
	var rescued atomic.Int64
	for i, q := range reclaim {
		if !q.Queue(wq.NewWork(func() { rescued.Add(1) })) {
			childFail("Queue on MemReclaim queue %d refused", i)
		}
	}
	childWait(20*time.Second, "every MemReclaim item to be rescued", func() bool {
		return rescued.Load() == nReclaim
	})
	fmt.Println("phase: the MemReclaim items were rescued")
	// Every other creator is refused, not aborted.
	if q, err := wq.Alloc("gate-reclaim-late", wq.Unbound|wq.MemReclaim, 8, wq.Threads()); !errors.Is(err, wq.ErrThreadLimit) {
		if q != nil {
			q.Destroy()
		}
		childFail("Alloc of a MemReclaim queue at the limit: %v, want ErrThreadLimit", err)
	}
	var kws []*kthread.Worker
	var kerr error
	for range 64 {
		kw, err := kthread.CreateWorker("gate-kw")
		if err != nil {
			kerr = err
			break
		}
		kws = append(kws, kw)
	}
	if !errors.Is(kerr, kthread.ErrThreadLimit) {
		childFail("kthread.CreateWorker at the limit: %v after %d workers, want kthread.ErrThreadLimit", kerr, len(kws))
	}
	for _, kw := range kws {
		if err := kw.Destroy(); err != nil {
			childFail("kthread Destroy: %v", err)
		}
	}
	set := timer.AcquireRT(1)
	for cpu := range 2 {
		if b := set.On(cpu); b != nil {
			childFail("RT timer base for CPU %d started at the limit", cpu)
		}
	}
	set.Release()
	close(release)
	childWait(20*time.Second, "every blocked item to run after the release", func() bool {
		return done.Load() == int64(queued)
	})
	destroyed := make(chan struct{})
	go func() {
		blocker.Destroy()
		for _, q := range reclaim {
			q.Destroy()
		}
		close(destroyed)
	}()
	select {
	case <-destroyed:
	case <-time.After(20 * time.Second):
		childFail("Destroy did not return")
	}
	mu.Lock()
	fmt.Printf("gate: %d blocking items, %d refusals reported, first: %s\n", queued, len(limitErrs), limitErrs[0])
	mu.Unlock()
	fmt.Printf("gate: refusals counted by the gate: %d; kthread: %v\n", sched.GateRefusals(), kerr)
	fmt.Println("LIMIT-CHILD-OK")
}

// leftThread holds a worker thread that a work function's goroutine left:
// unlockAndLeave, called from the work function, unlocks the goroutine
// from its thread (sched.LockDepth-1 calls: the levels the worker holds
// while a work function runs) and starts a goroutine that locks the old
// thread and holds it until release, so that the work function goes on
// on another thread and the old one stays alive to be read.
type leftThread struct {
	old     int
	release chan struct{}
	moved   bool
}

func (l *leftThread) unlockAndLeave() {
	l.old = sched.Gettid()
	for range sched.LockDepth - 1 {
		runtime.UnlockOSThread()
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		rel := make(chan struct{})
		got := make(chan int)
		go func() {
			runtime.LockOSThread()
			got <- sched.Gettid()
			<-rel
			runtime.UnlockOSThread()
		}()
		if <-got == l.old && sched.Gettid() != l.old {
			l.release, l.moved = rel, true
			return
		}
		close(rel)
	}
	// The runtime kept running the holder elsewhere (an idle P's thread
	// stole it): block until the goroutine wakes on another thread, and
	// leave the old one to the runtime.
	for range 1000 {
		time.Sleep(time.Millisecond)
		if sched.Gettid() != l.old {
			l.moved = true
			return
		}
	}
}

// lifecycleAttrs are a thread's attributes that must not leak with it.
type lifecycleAttrs struct {
	name   string
	cpus   []int
	policy sched.Policy
	prio   int
	nice   int
}

func (a lifecycleAttrs) String() string {
	return fmt.Sprintf("%q cpus %v policy %v prio %d nice %d", a.name, a.cpus, a.policy, a.prio, a.nice)
}

func readLifecycleAttrs(tid int) (lifecycleAttrs, error) {
	var a lifecycleAttrs
	var err error
	if a.name, err = sched.ThreadName(tid); err != nil {
		return a, err
	}
	if a.cpus, err = sched.Affinity(tid); err != nil {
		return a, err
	}
	at, err := sched.GetAttr(tid)
	if err != nil {
		return a, err
	}
	a.policy, a.prio, a.nice = at.Policy, at.Priority, at.Nice
	return a, nil
}

// TestLeftThreadResetOnEveryExit: a work function unlocks its worker's
// goroutine (sched.LockDepth-1 times), moves to another thread, then
// returns, panics or calls runtime.Goexit. The thread it left, on a
// per-CPU pool (named kworker/N:M, pinned to N), an RT pool (SCHED_FIFO),
// a rescuer and an escaper, must get the process's name, affinity and
// policy back, whichever thread the goroutine ends on. Catches an exit
// path that resets only the thread the goroutine ends on (Goexit left
// the old thread named, pinned and SCHED_FIFO in the Go runtime).
func TestLeftThreadResetOnEveryExit(t *testing.T) {
	defer wq.SetExitReportEvery(time.Nanosecond)()
	captureErrors(t)
	wq.SetPanicHandler(func(wq.PanicInfo) {})
	t.Cleanup(func() { wq.SetPanicHandler(nil) })
	cpus := wq.OnlineCPUs()
	last := cpus[len(cpus)-1]
	proc, err := readLifecycleAttrs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var fail atomic.Bool
	wq.SetCreateWorkerHook(func() error {
		if fail.Load() {
			return errors.New("creation refused by the test")
		}
		return nil
	})
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })

	type kind struct {
		name string
		// run queues w so that it runs on the kind's thread and returns a
		// cleanup; skip is a reason to skip the kind.
		run func(t *testing.T, w *wq.Work) (cleanup func(), skip string)
	}
	kinds := []kind{
		{"percpu", func(t *testing.T, w *wq.Work) (func(), string) {
			q := mustAlloc(t, "lc-percpu", wq.PerCPU, 0)
			q.QueueOn(last, w)
			return func() {}, ""
		}},
		{"rt", func(t *testing.T, w *wq.Work) (func(), string) {
			q, err := wq.Alloc("lc-rt", wq.Unbound|wq.RT, 0)
			if err != nil {
				return nil, fmt.Sprintf("no RT queue: %v", err)
			}
			t.Cleanup(q.Destroy)
			q.Queue(w)
			return func() {}, ""
		}},
		{"rescuer", func(t *testing.T, w *wq.Work) (func(), string) {
			q := mustAlloc(t, "lc-rescuer", wq.PerCPU|wq.MemReclaim, 0)
			fail.Store(true)
			q.QueueOn(last, w)
			return func() { fail.Store(false) }, ""
		}},
		{"escaper", func(t *testing.T, w *wq.Work) (func(), string) {
			if len(cpus) < 2 {
				return nil, "needs 2 CPUs"
			}
			q := allocEscape(t, "lc-escaper", wq.PerCPU, 0, time.Millisecond)
			release := holdPool(t, q, cpus[0])
			q.QueueOn(cpus[0], w)
			return release, ""
		}},
	}
	ends := []struct {
		name string
		end  func()
	}{
		{"return", func() {}},
		{"panic", func() { panic("left its thread and panicked") }},
		{"goexit", runtime.Goexit},
	}
	for _, k := range kinds {
		for _, e := range ends {
			t.Run(k.name+"/"+e.name, func(t *testing.T) {
				var l leftThread
				var attrs lifecycleAttrs
				w := wq.NewWork(func() {
					attrs, _ = readLifecycleAttrs(sched.Gettid())
					l.unlockAndLeave()
					if l.moved {
						e.end()
					}
				})
				cleanup, skip := k.run(t, w)
				if skip != "" {
					t.Skip(skip)
				}
				mustReturn(t, "Flush", func() { w.Flush() })
				cleanup()
				if !l.moved {
					t.Fatal("could not make the work function leave its thread in 10 s")
				}
				if l.release != nil {
					defer close(l.release)
				}
				// The thread's attributes while the item ran, so that the
				// check below shows a change.
				if attrs.name == proc.name && slices.Equal(attrs.cpus, proc.cpus) && attrs.policy == proc.policy {
					t.Logf("the worker thread had the process's attributes (%v): the reset is not shown", attrs)
				}
				deadline := time.Now().Add(5 * time.Second)
				for {
					got, err := readLifecycleAttrs(l.old)
					if l.release == nil && (err != nil || sched.Claimed(l.old)) {
						// Not held by the test: the thread exited, or a
						// new worker took it and gave it its own
						// attributes. Neither is a leak.
						break
					}
					if err != nil {
						t.Fatalf("thread %d, held by the test, cannot be read: %v", l.old, err)
					}
					ok := got.name == proc.name && slices.Equal(got.cpus, proc.cpus) && got.policy == proc.policy && got.prio == proc.prio
					if ok && sched.HasCapSysNice() && got.nice != proc.nice {
						ok = false
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("thread %d, left by the work function, still has %v (it had %v while the item ran), want the process's %v", l.old, got, attrs, proc)
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
}

// A work function that calls runtime.UnlockOSThread (1, 3 or LockDepth+2
// times) does not leave a worker running unlocked: its item completes, an
// escaped goroutine is caught (ErrWorkerExit), the thread it left gets the
// process's attributes back, and the next item runs with the class's.
func TestUnlockOSThreadInWorkFunction(t *testing.T) {
	for _, n := range []int{1, 3, sched.LockDepth + 2} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			defer wq.SetExitReportEvery(time.Nanosecond)()
			errs := captureErrors(t)
			flags := wq.PerCPU
			if isRoot() {
				flags |= wq.HighPri
			}
			q := mustAlloc(t, "unlock", flags, 0)
			tids := make(chan int, 2)
			w := wq.NewWork(func() {
				tids <- sched.Gettid()
				for i := 0; i < n; i++ {
					runtime.UnlockOSThread()
				}
				runtime.Gosched()
			})
			q.QueueOn(0, w)
			mustReturn(t, "Flush", func() { w.Flush() })
			tid1 := <-tids
			if n >= sched.LockDepth {
				// The goroutine is unlocked now; it is caught once the
				// scheduler moves it off its thread. Encourage that.
				for try := 0; try < 200 && errs.count(wq.ErrWorkerExit) == 0; try++ {
					w3 := wq.NewWork(func() {
						var wg sync.WaitGroup
						for k := 0; k < 4; k++ {
							wg.Add(1)
							go func() { defer wg.Done(); runtime.Gosched() }()
						}
						wg.Wait()
						time.Sleep(100 * time.Microsecond)
					})
					q.QueueOn(0, w3)
					mustReturn(t, "Flush", func() { w3.Flush() })
					time.Sleep(time.Millisecond)
				}
				if errs.count(wq.ErrWorkerExit) == 0 {
					t.Skip("the scheduler never moved the unlocked worker goroutine off its thread; nothing to detect")
				}
				// The escaped thread, if it still exists, has the process's
				// attributes back.
				// (A new worker may have taken the thread since: then it has
				// that worker's attributes, rightly.)
				if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid1)); err == nil && isRoot() && !slices.Contains(q.WorkerTIDs(0), tid1) && !sched.Claimed(tid1) {
					a, _ := sched.GetAttr(tid1)
					cpus, _ := sched.Affinity(tid1)
					proc, _ := sched.Affinity(os.Getpid())
					if a.Nice == -20 || len(cpus) != len(proc) {
						t.Errorf("escaped thread %d kept worker attributes: %+v cpus %v", tid1, a, cpus)
					}
				}
			}
			w2 := wq.NewWork(func() { tids <- sched.Gettid() })
			q.QueueOn(0, w2)
			mustReturn(t, "Flush", func() { w2.Flush() })
			tid2 := <-tids
			a, err := sched.GetAttr(tid2)
			if err != nil {
				t.Fatal(err)
			}
			if isRoot() && a.Nice != -20 {
				t.Errorf("worker %d after the item: nice %d, want -20", tid2, a.Nice)
			}
			if cpus, _ := sched.Affinity(tid2); len(cpus) != 1 || cpus[0] != 0 {
				t.Errorf("worker %d affinity %v, want [0]", tid2, cpus)
			}
			if n < sched.LockDepth {
				// The worker kept its thread and its attributes.
				if errs.count(wq.ErrWorkerExit) > 0 {
					t.Errorf("UnlockOSThread x%d retired the worker", n)
				}
				a1, err := sched.GetAttr(tid1)
				cpus, _ := sched.Affinity(tid1)
				if err != nil || (isRoot() && a1.Nice != -20) || len(cpus) != 1 || cpus[0] != 0 {
					t.Errorf("UnlockOSThread x%d: worker thread %d now %+v %v cpus %v", n, tid1, a1, err, cpus)
				}
			}
		})
	}
}

// After a queue's workers and rescuer exited, an unrelated thread must not
// be taken for one of them (tids are reused).
func TestIdentityClearedOnExit(t *testing.T) {
	wq.SetCreateWorkerHook(func() error { return errors.New("injected") })
	q, _ := wq.Alloc("ident", wq.Unbound|wq.MemReclaim, 0)
	w := wq.NewWork(func() {})
	q.Queue(w)
	mustReturn(t, "rescued item", func() { w.Flush() })
	wq.SetCreateWorkerHook(nil)
	errs := captureErrors(t)
	for i := 0; i < 50; i++ {
		q2, _ := wq.Alloc("ident2", wq.Unbound, 0)
		mustReturn(t, "Destroy", q2.Destroy)
	}
	mustReturn(t, "Destroy", q.Destroy)
	if n := errs.count(wq.ErrDeadlock); n != 0 {
		t.Errorf("Destroy from an unrelated thread reported ErrDeadlock %d times", n)
	}
}

func TestCallbackGoexitAndPanic(t *testing.T) {
	for _, kind := range []wqtrace.Kind{wqtrace.ExecuteStart, wqtrace.ExecuteEnd, wqtrace.QueueWork, wqtrace.ActivateWork} {
		for _, mode := range []string{"goexit", "panic"} {
			t.Run(kind.String()+"/"+mode, func(t *testing.T) {
				captureErrors(t)
				q := mustAlloc(t, "cbtrace", wq.PerCPU, 0)
				tr := &goexitTracer{kind: kind, fn: "TestCallbackGoexitAndPanic", mode: mode}
				wq.SetTracer(tr)
				defer wq.SetTracer(nil)
				var runs atomic.Int32
				w := wq.NewWork(func() { runs.Add(1) })
				// Queue from a goroutine: a Goexit in queue_work or
				// activate_work tracing ends that goroutine.
				go q.Queue(w)
				waitFor(t, "tracer fired", func() bool { return tr.fired.Load() > 0 })
				mustReturn(t, "Flush", func() { w.Flush() })
				waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
				// A Goexit in queue_work tracing leaves the item idle (not
				// queued); otherwise it ran exactly once.
				want := int32(1)
				if kind == wqtrace.QueueWork && mode == "goexit" {
					want = 0
				}
				if n := runs.Load(); n != want {
					t.Errorf("item ran %d times, want %d", n, want)
				}
				// The pool still serves.
				w2 := wq.NewWork(func() {})
				q.Queue(w2)
				mustReturn(t, "Flush after", func() { w2.Flush() })
				// Counters stay exact: each start counted once.
				if s := q.Stats(); s.Total != int64(want)+1 || s.Infl != 0 {
					t.Errorf("Stats: total %d infl %d, want total %d infl 0", s.Total, s.Infl, want+1)
				}
				mustReturn(t, "Destroy", q.Destroy)
			})
		}
	}
}

func TestPanicHandlerGoexitAndPanic(t *testing.T) {
	for _, mode := range []string{"goexit", "panic"} {
		for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound, wq.Unbound | wq.MemReclaim} {
			t.Run(mode+"/"+flags.String(), func(t *testing.T) {
				wq.SetPanicHandler(func(wq.PanicInfo) {
					if mode == "goexit" {
						runtime.Goexit()
					}
					panic("handler panic")
				})
				defer wq.SetPanicHandler(nil)
				captureErrors(t)
				q := mustAlloc(t, "cbpanic", flags, 0)
				for i := 0; i < 3; i++ {
					w := wq.NewWork(func() { panic("item") })
					q.Queue(w)
					mustReturn(t, "Flush", func() { w.Flush() })
					waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
				}
				mustReturn(t, "queue Flush", q.Flush)
				if s := q.Stats(); s.Panics != 3 || s.Infl != 0 {
					t.Errorf("stats: panics %d infl %d", s.Panics, s.Infl)
				}
			})
		}
	}
}

func TestErrorHandlerGoexitInItem(t *testing.T) {
	// The error handler runs on the worker when an item calls its own
	// CancelSync; a handler that calls Goexit ends the worker like a Goexit
	// in the item.
	wq.SetErrorHandler(func(op, fn string, err error) { runtime.Goexit() })
	defer wq.SetErrorHandler(nil)
	q := mustAlloc(t, "cberr", wq.PerCPU, 0)
	for i := 0; i < 3; i++ {
		var w *wq.Work
		w = wq.NewWork(func() { w.CancelSync() })
		q.Queue(w)
		mustReturn(t, "Flush", func() { w.Flush() })
	}
	mustReturn(t, "Destroy", q.Destroy)
}

// TestUnlockedThreadResetWithoutNextItem: a work function unlocks the
// worker's goroutine from its thread and then blocks, so the goroutine may
// move; the thread it left (pinned to CPU 0 for a per-CPU pool) must get
// the process's attributes back when the item ends, not at the next item,
// which may never come (found by a stranger: ordinary goroutines ran on an
// RT worker's thread after its last item). Rounds where the goroutine woke
// on the same thread prove nothing and are retried.
func TestUnlockedThreadResetWithoutNextItem(t *testing.T) {
	defer wq.SetExitReportEvery(time.Nanosecond)()
	errs := captureErrors(t)
	procCPUs, err := sched.Affinity(os.Getpid())
	if err != nil || len(procCPUs) < 2 {
		t.Skip("needs a process allowed on two CPUs:", err)
	}
	workerOn := func(tid int) string {
		for _, p := range wq.Pools() {
			for _, wi := range p.Workers {
				if wi.TID == tid {
					return wi.Name
				}
			}
		}
		return ""
	}
	for round := 0; round < 20; round++ {
		q := mustAlloc(t, "unlock-reset", wq.PerCPU, 0)
		type seen struct {
			before, after int
			name          string
		}
		got := make(chan seen, 1)
		w := wq.NewWork(func() {
			var s seen
			s.before = sched.Gettid()
			s.name = workerOn(s.before)
			for i := 0; i < sched.LockDepth+2; i++ {
				runtime.UnlockOSThread()
			}
			time.Sleep(20 * time.Millisecond)
			s.after = sched.Gettid()
			got <- s
		})
		q.QueueOn(0, w)
		mustReturn(t, "Flush", func() { w.Flush() })
		s := <-got
		before, after, name := s.before, s.after, s.name
		if before == after {
			q.Destroy()
			continue
		}
		// The goroutine moved: its old thread must be reset, gone, or the
		// thread of a new worker (GoLocked may pick it up for the
		// replacement, which pins it again).
		isWorker := func(tid int) bool {
			n := workerOn(tid)
			return n != "" && n != name // a new worker, not the one that left
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			cpus, err := sched.Affinity(before)
			if err != nil || len(cpus) == len(procCPUs) || isWorker(before) {
				q.Destroy()
				return
			}
			if time.Now().After(deadline) {
				errs.mu.Lock()
				t.Fatalf("thread %d, left by a worker's goroutine (now on %d), still has the pool's affinity %v 5 s after its item ended; reports: %v", before, after, cpus, errs.errs)
			}
			time.Sleep(time.Millisecond)
		}
	}
	t.Skip("the goroutine never moved off its thread in 20 rounds")
}

// TestFlushFromAbandonedWorkerThread: a work function unlocks the worker's
// goroutine and blocks; another goroutine then runs on the worker's thread
// (it was made by the item, so the thread's P runs it next) and flushes the
// item. It is not the item's own goroutine, so Flush must wait (here: until
// its context expires), not take it for a self-flush and report
// ErrDeadlock. The worker's identity is confirmed by goroutine, not by
// thread alone.
func TestFlushFromAbandonedWorkerThread(t *testing.T) {
	defer wq.SetExitReportEvery(time.Nanosecond)()
	_ = captureErrors(t)
	q := mustAlloc(t, "abandoned", wq.PerCPU, 0)
	checked := false
	for round := 0; round < 20 && !checked; round++ {
		type result struct {
			itemTID, flushTID int
			err               error
		}
		res := make(chan result, 1)
		var w *wq.Work
		w = wq.NewWork(func() {
			itemTID := sched.Gettid()
			for i := 0; i < sched.LockDepth+2; i++ {
				runtime.UnlockOSThread()
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				tid := sched.Gettid()
				_, err := w.FlushContext(ctx)
				done <- result{itemTID, tid, err}
			}()
			res <- <-done
		})
		q.QueueOn(0, w)
		r := <-res
		mustReturn(t, "Flush", func() { w.Flush() })
		if r.flushTID != r.itemTID {
			continue // the flusher ran elsewhere: nothing shown
		}
		checked = true
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("FlushContext from another goroutine on the worker's thread %d = %v, want it to wait (context.DeadlineExceeded)", r.itemTID, r.err)
		}
	}
	if !checked {
		t.Skip("the flushing goroutine never ran on the worker's thread in 20 rounds")
	}
}

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

// Every self-wait returns ErrDeadlock from the item itself also after a
// work function moved the worker's goroutine off its thread (unlocked it
// and blocked): the identity is the goroutine's, not the thread's.
// Before, each of these waited until its deadline, or forever.
func TestSelfWaitsAfterThreadMove(t *testing.T) {
	type call func(ctx context.Context, q *wq.Workqueue, dw *wq.DelayedWork, errs *errLog) error
	// reported turns a call that returns no error into the ErrDeadlock
	// it reported, if it did.
	reported := func(errs *errLog, f func()) error {
		before := errs.count(wq.ErrDeadlock)
		f()
		if errs.count(wq.ErrDeadlock) > before {
			return wq.ErrDeadlock
		}
		return nil
	}
	cases := []struct {
		name string
		call call
	}{
		{"Workqueue.FlushContext", func(ctx context.Context, q *wq.Workqueue, _ *wq.DelayedWork, _ *errLog) error {
			return q.FlushContext(ctx)
		}},
		{"Workqueue.DrainContext", func(ctx context.Context, q *wq.Workqueue, _ *wq.DelayedWork, _ *errLog) error {
			return q.DrainContext(ctx)
		}},
		{"Workqueue.DestroyContext", func(ctx context.Context, q *wq.Workqueue, _ *wq.DelayedWork, _ *errLog) error {
			return q.DestroyContext(ctx)
		}},
		{"Work.FlushContext", func(ctx context.Context, _ *wq.Workqueue, dw *wq.DelayedWork, _ *errLog) error {
			_, err := dw.Work.FlushContext(ctx)
			return err
		}},
		{"Work.CancelSyncContext", func(ctx context.Context, _ *wq.Workqueue, dw *wq.DelayedWork, _ *errLog) error {
			_, err := dw.Work.CancelSyncContext(ctx)
			return err
		}},
		{"Work.CancelSync", func(_ context.Context, _ *wq.Workqueue, dw *wq.DelayedWork, errs *errLog) error {
			return reported(errs, func() { dw.Work.CancelSync() })
		}},
		{"Work.DisableSync", func(_ context.Context, _ *wq.Workqueue, dw *wq.DelayedWork, errs *errLog) error {
			defer dw.Work.Enable()
			return reported(errs, func() { dw.Work.DisableSync() })
		}},
		{"DelayedWork.FlushContext", func(ctx context.Context, q *wq.Workqueue, dw *wq.DelayedWork, _ *errLog) error {
			q.QueueDelayed(dw, time.Hour) // armed: the flush queues it and would wait for it
			_, err := dw.FlushContext(ctx)
			return err
		}},
	}
	errs := captureErrors(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := wq.Alloc("self-wait-moved", wq.Unbound, 0, wq.Threads())
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				moved bool
				err   error
			}
			res := make(chan result, 1)
			var runs atomic.Int32
			var dw *wq.DelayedWork
			dw = wq.NewDelayedWork(func() {
				if runs.Add(1) > 1 {
					return // the instance a DelayedWork flush queued
				}
				if !wq.MoveOffThread() {
					res <- result{}
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*testutil.Timeout)
				defer cancel()
				res <- result{true, c.call(ctx, q, dw, errs)}
			})
			q.Queue(&dw.Work)
			select {
			case r := <-res:
				if !r.moved {
					q.Destroy()
					t.Skip("the work function's goroutine did not move to another thread")
				}
				if !errors.Is(r.err, wq.ErrDeadlock) {
					t.Errorf("%s from the item after its goroutine moved = %v, want ErrDeadlock", c.name, r.err)
				}
			case <-time.After(testutil.Timeout):
				// The item waits for itself: q cannot be destroyed.
				t.Fatalf("%s from the item after its goroutine moved waits (for itself)", c.name)
			}
			dw.Cancel()
			q.Destroy()
		})
	}
}

// TestDestroyContextDeadlineKeepsRefusing: DestroyContext returns at its
// deadline, the queue keeps refusing and drains alone, and a later Destroy
// waits for that drain.
func TestDestroyContextDeadlineKeepsRefusing(t *testing.T) {
	// Catches a DestroyContext that stops the drain at the deadline, a
	// queue that accepts work again after it, or a second Destroy that
	// does not wait.
	errs := captureErrors(t)
	q, err := wq.Alloc("sd-deadline", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	var ran atomic.Int64
	queued := wq.NewWork(func() { ran.Add(1) })
	q.Queue(queued) // inactive behind the blocker: the drain must run it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DestroyContext with a running item = %v, want DeadlineExceeded", err)
	}
	late := wq.NewWork(func() { ran.Add(100) })
	if q.Queue(late) || late.Pending() {
		t.Fatal("Queue accepted after DestroyContext's deadline")
	}
	if errs.count(wq.ErrDraining) == 0 {
		t.Error("refusal during the background drain not reported as ErrDraining")
	}
	if q.QueueDelayed(wq.NewDelayedWork(func() {}), time.Hour) {
		t.Error("QueueDelayed accepted after DestroyContext began")
	}
	// Already done: returns at once, the destroy still pending.
	dead, c2 := context.WithCancel(context.Background())
	c2()
	if err := q.DestroyContext(dead); !errors.Is(err, context.Canceled) {
		t.Fatalf("DestroyContext(cancelled) during the drain = %v", err)
	}
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	select {
	case <-destroyed:
		t.Fatal("Destroy returned while the first destroy still drains")
	case <-time.After(20 * time.Millisecond):
	}
	b.free()
	select {
	case <-destroyed:
	case <-time.After(30 * time.Second):
		t.Fatal("Destroy did not return after the drain")
	}
	if ran.Load() != 1 {
		t.Fatalf("ran = %d, want 1 (the queued item, not the refused one)", ran.Load())
	}
	if err := q.DestroyContext(context.Background()); err != nil {
		t.Fatalf("DestroyContext on a destroyed queue = %v", err)
	}
	if err := q.DestroyContext(dead); err != nil {
		t.Fatalf("DestroyContext(cancelled ctx) on a destroyed queue = %v, want nil", err)
	}
}

// TestDestroyContextRacingQueue: many goroutines queue while the queue is
// destroyed; every accepted item runs, none after Destroy returns.
func TestDestroyContextRacingQueue(t *testing.T) {
	// Catches an item accepted during the destroy and then dropped, or run
	// after DestroyContext returned nil.
	wq.SetErrorHandler(func(string, string, error) {})
	defer wq.SetErrorHandler(nil)
	for round := range 5 {
		q, err := wq.Alloc("sd-race", wq.Unbound, 4, wq.WithMaxPending(64))
		if err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		var after atomic.Bool
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					w := wq.NewWork(func() {
						if after.Load() {
							t.Error("an item ran after DestroyContext returned nil")
						}
						ran.Add(1)
					})
					if q.Queue(w) {
						accepted.Add(1)
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					if q.QueueContext(ctx, wq.NewWork(func() { ran.Add(1) })) == nil {
						accepted.Add(1)
					}
					cancel()
				}
			}()
		}
		time.Sleep(time.Duration(round+1) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = q.DestroyContext(ctx)
		cancel()
		if err != nil {
			t.Fatalf("DestroyContext = %v", err)
		}
		after.Store(true)
		close(stop)
		wg.Wait()
		if a, r := accepted.Load(), ran.Load(); a != r {
			t.Fatalf("round %d: accepted %d items, ran %d", round, a, r)
		}
		if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 0 {
			t.Fatalf("after destroy Pending %d, count %d", s.Pending, q.PendingCount())
		}
	}
}

// TestDrainContextDeadlineKeepsDraining: after DrainContext's deadline the
// queue does not silently accept work again; it accepts once the drain
// has completed in the background.
func TestDrainContextDeadlineKeepsDraining(t *testing.T) {
	// Catches the old behaviour: draining mode dropped at the deadline.
	errs := captureErrors(t)
	q := mustAlloc(t, "sd-drain", wq.Unbound, 1)
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := q.DrainContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DrainContext = %v, want DeadlineExceeded", err)
	}
	w := wq.NewWork(func() {})
	if q.Queue(w) {
		t.Fatal("Queue accepted after DrainContext's deadline, drain not complete")
	}
	if errs.count(wq.ErrDraining) != 1 {
		t.Errorf("ErrDraining reported %d times, want 1", errs.count(wq.ErrDraining))
	}
	if err := q.QueueContext(context.Background(), w); !errors.Is(err, wq.ErrDraining) {
		t.Fatalf("QueueContext during the background drain = %v, want ErrDraining", err)
	}
	b.free()
	waitFor(t, "the background drain to end", func() bool { return q.Queue(w) })
	q.Flush()
}

// TestCancelPendingCancelsWaitingItems covers lists, inactive items,
// chains and armed timers, and leaves the running item alone.
func TestCancelPendingCancelsWaitingItems(t *testing.T) {
	// Catches a kind of waiting item left queued, a running item disturbed,
	// or a wrong count.
	q := allocBounded(t, "sd-cancel", wq.Unbound, 2, 100)
	b1, b2 := newBlocker(), newBlocker()
	defer b1.free()
	defer b2.free()
	q.QueueKeyed(7, b1.w)
	b1.waitStarted(t)
	q.Queue(b2.w)
	b2.waitStarted(t)
	var ran atomic.Int64
	fn := func() { ran.Add(1) }
	for range 5 {
		q.Queue(wq.NewWork(fn)) // inactive: max_active 2 is taken
	}
	for range 4 {
		q.QueueKeyed(7, wq.NewWork(fn)) // chained behind b1
	}
	var dws []*wq.DelayedWork
	for range 3 {
		dw := wq.NewDelayedWork(fn)
		q.QueueDelayed(dw, time.Hour)
		dws = append(dws, dw)
	}
	if s := q.Stats(); s.Pending != 9 {
		t.Fatalf("Stats.Pending = %d, want 9", s.Pending)
	}
	if n := q.CancelPending(); n != 12 {
		t.Fatalf("CancelPending = %d, want 12", n)
	}
	for _, dw := range dws {
		if dw.Pending() {
			t.Fatal("armed item still pending")
		}
	}
	if s := q.Stats(); s.Pending != 0 || q.PendingCount() != 2 {
		t.Errorf("after CancelPending: Pending %d, count %d; want 0, 2 (the running items)", s.Pending, q.PendingCount())
	}
	if b1.w.Busy()&wq.BusyRunning == 0 || b2.w.Busy()&wq.BusyRunning == 0 {
		t.Error("a running item was disturbed")
	}
	b1.free()
	b2.free()
	q.Flush()
	if ran.Load() != 0 {
		t.Errorf("%d cancelled items ran", ran.Load())
	}
	// The queue and the key go on.
	q.QueueKeyed(7, wq.NewWork(fn))
	q.Flush()
	if ran.Load() != 1 {
		t.Error("the queue did not accept work after CancelPending")
	}
	if q.CancelPending() != 0 {
		t.Error("CancelPending of an idle queue != 0")
	}
}

// TestCancelPendingRacingQueueKeyed: every item is either cancelled or
// run, exactly once, and the keys do not stall.
func TestCancelPendingRacingQueueKeyed(t *testing.T) {
	// Catches a chain left stalled, an item both run and counted as
	// cancelled, or a lost item.
	q := mustAlloc(t, "sd-cancel-keyed", wq.Unbound, 2)
	var ran, queued, cancelled atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				if q.QueueKeyed(uint64(g*4+i%4), wq.NewWork(func() { ran.Add(1) })) {
					queued.Add(1)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			cancelled.Add(int64(q.CancelPending()))
			time.Sleep(100 * time.Microsecond)
		}
	}()
	wg.Wait()
	done := make(chan struct{})
	go func() { q.Flush(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Flush hung: a key's chain stalled after CancelPending")
	}
	if r, c, n := ran.Load(), cancelled.Load(), queued.Load(); r+c != n {
		t.Fatalf("ran %d + cancelled %d != queued %d", r, c, n)
	}
	if s := q.Stats(); s.Pending != 0 {
		t.Errorf("Pending = %d after Flush", s.Pending)
	}
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Errorf("%d keys still in flight", keys)
	}
}

// TestDestroyContextCancelledCtxBeginsDestroy: a ctx already done still
// begins the destroy (the queue refuses at once) and returns ctx.Err().
func TestDestroyContextCancelledCtxBeginsDestroy(t *testing.T) {
	// Catches a DestroyContext that returns early without beginning, so
	// the queue would still accept work.
	wq.SetErrorHandler(func(string, string, error) {})
	defer wq.SetErrorHandler(nil)
	q, err := wq.Alloc("sd-cancelled", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("DestroyContext(cancelled) with a running item = %v, want Canceled", err)
	}
	if q.Queue(wq.NewWork(func() {})) {
		t.Fatal("Queue accepted after DestroyContext(cancelled)")
	}
	b.free()
	q.Destroy()
	if q.Queue(wq.NewWork(func() {})) {
		t.Fatal("Queue accepted after Destroy")
	}
}

// A timer that fires while Destroy runs, and QueueOn/ModDelayedOn/Congested
// after Destroy, must not touch the emptied table.
func TestCallsAfterDestroyDoNotPanic(t *testing.T) {
	for i := 0; i < 20; i++ {
		errs := captureErrors(t)
		q, _ := wq.Alloc("late", wq.PerCPU, 0)
		dw := wq.NewDelayedWork(func() {})
		q.QueueDelayed(dw, time.Duration(i%4)*100*time.Microsecond)
		q.Destroy()
		w := wq.NewWork(func() {})
		if q.QueueOn(0, w) || q.QueueDelayedOn(0, dw, time.Millisecond) || q.ModDelayedOn(0, dw, 0) || q.Congested(0) {
			t.Fatal("a call on a destroyed queue succeeded")
		}
		if dw.Pending() {
			t.Fatal("delayed item pending after Destroy")
		}
		if errs.count(wq.ErrDestroyed) == 0 {
			t.Fatal("no ErrDestroyed reported")
		}
		wq.SetErrorHandler(nil)
	}
}

func TestDestroyRacingAttributeChanges(t *testing.T) {
	captureErrors(t)
	for i := 0; i < 20; i++ {
		q, _ := wq.Alloc("attrrace", wq.Unbound, 0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = q.SetAffinityStrict(k%2 == 0)
				_ = q.SetMaxActive(1 + k%4)
			}
		}()
		w := wq.NewWork(func() {})
		q.Queue(w)
		mustReturn(t, "Destroy", q.Destroy)
		close(stop)
		wg.Wait()
		if err := q.SetAffinityStrict(true); !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("attribute write after Destroy: %v, want ErrDestroyed", err)
		}
		if err := q.SetMaxActive(2); !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("SetMaxActive after Destroy: %v, want ErrDestroyed", err)
		}
		if n := q.NumPwqs(); n != 0 {
			t.Fatalf("%d pwqs installed after Destroy", n)
		}
	}
}

// TestDrainingReportedOncePerDrain: queue attempts refused while a queue
// drains return false every time, but the error handler hears of the
// first of each drain only (a producer that keeps queueing would report
// thousands), and a later drain reports again.
func TestDrainingReportedOncePerDrain(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "drain-once", wq.Unbound, 0)
	for round := 1; round <= 2; round++ {
		release := make(chan struct{})
		started := make(chan struct{})
		blocker := wq.NewWork(func() { close(started); <-release })
		q.Queue(blocker)
		<-started
		done := make(chan struct{})
		go func() { q.Drain(); close(done) }()
		refused := 0
		for refused < 100 {
			if !q.Queue(wq.NewWork(func() {})) {
				refused++
			}
			runtime.Gosched()
		}
		close(release)
		<-done
		if n := errs.count(wq.ErrDraining); n != round {
			t.Fatalf("drain %d: %d ErrDraining reports after %d refusals in all, want %d", round, n, 100*round, round)
		}
	}
}

// TestCancelPendingEndsGroupAndFuture: a Group function or a Future
// cancelled by CancelPending before it ran ends with ErrCancelled.
// Catches CancelPending not ending one-shot Go items (cancelGoItem), which
// leaves Group.Wait and Future.Wait waiting forever.
func TestCancelPendingEndsGroupAndFuture(t *testing.T) {
	q, err := wq.Alloc("sde-cancel-go", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	b := newBlocker()
	defer b.free()
	q.Queue(b.w)
	b.waitStarted(t)
	g, _ := q.NewGroup(context.Background())
	ran := make(chan struct{}, 10)
	for range 3 {
		g.Go(func(context.Context) error { ran <- struct{}{}; return nil })
	}
	f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { ran <- struct{}{}; return 1, nil })
	if n := q.CancelPending(); n != 4 {
		t.Fatalf("CancelPending = %d, want 4", n)
	}
	b.free()
	gw := make(chan error, 1)
	go func() { gw <- g.Wait() }()
	select {
	case err := <-gw:
		if !errors.Is(err, wq.ErrCancelled) {
			t.Errorf("Group.Wait = %v, want ErrCancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait did not return after CancelPending cancelled its functions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, wq.ErrCancelled) {
		t.Errorf("Future.Wait = %v, want ErrCancelled", err)
	}
	if len(ran) != 0 {
		t.Errorf("%d cancelled functions ran", len(ran))
	}
}

// TestDestroyGoexitInErrorHandlerReleasesWaiters: an error handler that
// calls runtime.Goexit on the destroy's ErrDelayedPending report ends the
// goroutine that runs the destroy; DestroyContext and a later Destroy
// still return, and the queue is destroyed. Catches a destroy whose done
// channel is closed only on a normal return.
func TestDestroyGoexitInErrorHandlerReleasesWaiters(t *testing.T) {
	q, err := wq.Alloc("sde-goexit", wq.Unbound, 1, wq.WithErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrDelayedPending) {
			runtime.Goexit()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	q.QueueDelayed(wq.NewDelayedWork(func() {}), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.DestroyContext(ctx); err != nil {
		t.Fatalf("DestroyContext = %v, want nil", err)
	}
	done := make(chan struct{})
	go func() { q.Destroy(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a later Destroy waits forever after the handler's Goexit")
	}
	if _, err := q.QueueErr(wq.NewWork(func() {})); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("QueueErr after Destroy = %v, want ErrDestroyed", err)
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
