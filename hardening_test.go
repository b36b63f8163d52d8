package wq_test

import (
	"context"
	"errors"
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
	"github.com/gowq/wq/wqtrace"
)

// Regression tests for the hardening issue: every kind of fault with
// several inputs. None of them asserts a duration; each waits with a
// generous deadline for what must happen, and a hang fails through
// mustReturn.

// mustReturn runs f and fails the test if it has not returned within 10 s.
func mustReturn(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return (hang)", what)
	}
}

// 1. Calls on an item from inside its own running instance while another
// goroutine waits to cancel it.
func TestSelfCallsDuringCancelSync(t *testing.T) {
	type selfCall struct {
		name string
		call func(q *wq.Workqueue, dw *wq.DelayedWork) bool
		want bool
	}
	calls := []selfCall{
		{"ModDelayed 1ms", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.ModDelayed(dw, time.Millisecond) }, true},
		{"ModDelayed 0", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.ModDelayed(dw, 0) }, true},
		{"QueueDelayed", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.QueueDelayed(dw, time.Millisecond) }, false},
		{"Queue", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return q.Queue(&dw.Work) }, false},
		{"Cancel", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.Cancel() }, false},
		{"CancelSync", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.CancelSync() }, false},
		{"DisableSync", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.DisableSync() }, false},
		{"Flush", func(q *wq.Workqueue, dw *wq.DelayedWork) bool { return dw.Flush() }, false},
	}
	for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		for _, sync := range []string{"CancelSync", "DisableSync"} {
			for _, c := range calls {
				t.Run(flags.String()+"/"+sync+"/"+c.name, func(t *testing.T) {
					errs := captureErrors(t)
					q := mustAlloc(t, "selfcall", flags, 0)
					started := make(chan struct{})
					proceed := make(chan struct{})
					var got atomic.Int32
					var runs atomic.Int32
					var dw *wq.DelayedWork
					dw = wq.NewDelayedWork(func() {
						if runs.Add(1) > 1 {
							return
						}
						close(started)
						<-proceed
						if c.call(q, dw) {
							got.Store(1)
						} else {
							got.Store(2)
						}
					})
					if !q.QueueDelayed(dw, 0) {
						t.Fatal("QueueDelayed refused")
					}
					<-started
					cancelled := make(chan bool)
					go func() {
						if sync == "CancelSync" {
							cancelled <- dw.CancelSync()
						} else {
							cancelled <- dw.DisableSync()
						}
					}()
					// Let the canceller take hold of the item first.
					waitFor(t, "canceller to hold the item", func() bool { return wq.Held(&dw.Work) })
					close(proceed)
					var was bool
					mustReturn(t, sync, func() { was = <-cancelled })
					if was {
						t.Errorf("%s = true for an item that was only running", sync)
					}
					if g := got.Load(); g == 0 || (g == 1) != c.want {
						t.Errorf("self %s returned %v, want %v", c.name, g == 1, c.want)
					}
					if dw.Pending() {
						t.Errorf("item pending after %s returned", sync)
					}
					time.Sleep(5 * time.Millisecond) // a re-armed 1 ms timer would have fired
					if n := runs.Load(); n != 1 {
						t.Errorf("item ran %d times; the canceller must win", n)
					}
					if c.name == "CancelSync" || c.name == "DisableSync" || c.name == "Flush" {
						if errs.count(wq.ErrDeadlock) == 0 {
							t.Errorf("self %s did not report ErrDeadlock", c.name)
						}
					}
					if sync == "DisableSync" || c.name == "DisableSync" {
						for dw.Disabled() {
							dw.Enable()
						}
					}
					mustReturn(t, "Destroy", q.Destroy)
				})
			}
		}
	}
}

// The example, from outside: ModDelayed racing CancelSync must not
// re-arm the item after CancelSync returned.
func TestModDelayedRacingCancelSync(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, time.Hour} {
		q := mustAlloc(t, "modrace", wq.Unbound, 0)
		started := make(chan struct{}, 1)
		release := make(chan struct{})
		var runs atomic.Int32
		dw := wq.NewDelayedWork(func() {
			runs.Add(1)
			started <- struct{}{}
			<-release
		})
		q.QueueDelayed(dw, 0)
		<-started
		done := make(chan struct{})
		go func() { dw.CancelSync(); close(done) }()
		waitFor(t, "hold", func() bool { return wq.Held(&dw.Work) })
		var modRet bool
		mustReturn(t, "ModDelayed during CancelSync", func() { modRet = q.ModDelayed(dw, d) })
		if !modRet {
			t.Errorf("d=%v: ModDelayed during CancelSync = false, want true (the canceller wins)", d)
		}
		close(release)
		mustReturn(t, "CancelSync", func() { <-done })
		if dw.Pending() {
			t.Errorf("d=%v: re-armed after CancelSync returned", d)
		}
		time.Sleep(5 * time.Millisecond)
		if n := runs.Load(); n != 1 {
			t.Errorf("d=%v: item ran %d times", d, n)
		}
		mustReturn(t, "Destroy", q.Destroy)
	}
}

// 2. Destroy while delayed items are armed: they end idle and reported, and
// another queue can take them.
func TestDestroyWithArmedDelayed(t *testing.T) {
	for _, c := range []struct {
		flags wq.Flags
		delay time.Duration
		n     int
	}{{wq.PerCPU, 300 * time.Millisecond, 1}, {wq.Unbound, time.Hour, 3}, {wq.PerCPU | wq.MemReclaim, time.Hour, 2}} {
		errs := captureErrors(t)
		q, err := wq.Alloc("armed", c.flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Int32
		var dws []*wq.DelayedWork
		for range c.n {
			dw := wq.NewDelayedWork(func() { ran.Add(1) })
			if !q.QueueDelayed(dw, c.delay) {
				t.Fatal("QueueDelayed refused")
			}
			dws = append(dws, dw)
		}
		mustReturn(t, "Destroy", q.Destroy)
		if got := errs.count(wq.ErrDelayedPending); got != 1 {
			t.Errorf("ErrDelayedPending reported %d times, want 1", got)
		}
		q2 := mustAlloc(t, "armed2", wq.Unbound, 0)
		for i, dw := range dws {
			if dw.Pending() {
				t.Errorf("item %d pending after Destroy", i)
			}
			mustReturn(t, "Flush", func() {
				if dw.Flush() {
					t.Errorf("item %d: Flush after Destroy waited", i)
				}
			})
			if q.QueueDelayed(dw, 0) {
				t.Errorf("QueueDelayed on the destroyed queue accepted")
			}
			if !q2.QueueDelayed(dw, time.Millisecond) {
				t.Errorf("item %d: another queue could not take it", i)
			}
		}
		waitFor(t, "items on the second queue", func() bool { return int(ran.Load()) == c.n })
		if q.ModDelayed(dws[0], time.Millisecond) {
			t.Error("ModDelayed on a destroyed queue returned true")
		}
		wq.SetErrorHandler(nil)
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

// 4. Normal-class workers get nice 0 whatever the creating thread's nice.
func TestNormalClassSetExplicitly(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root to lower a nice 19 thread back to 0; the unprivileged case is TestNicedUnprivilegedClassReported")
	}
	// Create the pool's first worker from a thread at nice 19: the new
	// thread may inherit it.
	q := mustAlloc(t, "explicit", wq.Unbound, 0, wq.Threads()) // the class of a worker thread
	tidc := make(chan int, 1)
	done := make(chan struct{})
	sched.GoLocked(func() {
		defer close(done)
		_ = sched.SetAttr(0, sched.Attr{Policy: sched.PolicyNormal, Nice: 19})
		w := wq.NewWork(func() { tidc <- sched.Gettid() })
		q.Queue(w)
		w.Flush()
	})
	<-done
	tid := <-tidc
	a, err := sched.GetAttr(tid)
	if err != nil {
		t.Fatal(err)
	}
	if a.Policy != sched.PolicyNormal || a.Nice != 0 {
		t.Errorf("normal-class worker %d: %+v, want SCHED_OTHER nice 0", tid, a)
	}
	if s := q.Stats(); s.ClassError != "" {
		t.Errorf("ClassError = %q as root", s.ClassError)
	}
}

// As an unprivileged process at nice 19, a normal-class worker keeps nice
// 19 (it may not lower it): the item still runs and the shortfall is
// reported once and shown in Stats.
func TestNicedUnprivilegedClassReported(t *testing.T) {
	if os.Getenv("GOWQ_CHILD_NICED") == "1" {
		nicedChild(t)
		return
	}
	cmd, _ := nobodyCmd(t, []string{"-test.run=^TestNicedUnprivilegedClassReported$", "-test.v"}, "GOWQ_CHILD_NICED=1")
	cmd.Args = append([]string{"nice", "-n", "19"}, cmd.Args...)
	cmd.Path = mustLookPath(t, "nice")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NICED-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func nicedChild(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "niced", wq.Unbound, 0, wq.Threads()) // the class of a worker thread
	tidc := make(chan int, 1)
	w := wq.NewWork(func() { tidc <- sched.Gettid() })
	q.Queue(w)
	select {
	case tid := <-tidc:
		a, _ := sched.GetAttr(tid)
		if a.Nice != 19 && a.Nice != 0 {
			t.Fatalf("worker nice %d", a.Nice)
		}
		if a.Nice == 19 {
			if q.Stats().ClassError == "" {
				t.Fatal("worker kept nice 19 but Stats().ClassError is empty")
			}
			waitFor(t, "class report", func() bool { return errs.count(wq.ErrPermission) == 1 })
		}
	case <-time.After(10 * time.Second):
		t.Fatal("item did not run in a niced unprivileged process")
	}
	// More workers: reported once only.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		q.Queue(wq.NewWork(func() { time.Sleep(time.Millisecond); wg.Done() }))
	}
	wg.Wait()
	time.Sleep(20 * time.Millisecond)
	if n := errs.count(wq.ErrPermission); n > 1 {
		t.Fatalf("class shortfall reported %d times, want once", n)
	}
	t.Log("NICED-OK")
	println("NICED-OK")
}

// 5. The rescuer.
func TestRescuerPaths(t *testing.T) {
	fail := atomic.Bool{}
	wq.SetCreateWorkerHook(func() error {
		if fail.Load() {
			return errors.New("injected: no threads")
		}
		return nil
	})
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })
	captureErrors(t)

	t.Run("requeue while rescued", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-a", wq.Unbound|wq.MemReclaim, 0)
		var runs atomic.Int32
		var w *wq.Work
		w = wq.NewWork(func() {
			if runs.Add(1) < 5 {
				q.Queue(w) // queued again while the rescuer runs it
			}
		})
		q.Queue(w)
		waitFor(t, "five rescued runs", func() bool { return runs.Load() == 5 })
		waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
		if s := q.Stats(); s.Rescued < 5 || s.CreateErrors == 0 || s.CreateError == "" {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("mayday after an empty fire", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-b", wq.Unbound|wq.MemReclaim, 0)
		for round := 0; round < 3; round++ {
			var ran atomic.Bool
			q.Queue(wq.NewWork(func() { ran.Store(true) }))
			waitFor(t, "rescued item", ran.Load)
			// Let the mayday timer fire with an empty worklist.
			time.Sleep(150 * time.Millisecond)
		}
	})
	t.Run("Goexit in a rescued item", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-c", wq.PerCPU|wq.MemReclaim, 0)
		for i := 0; i < 3; i++ {
			w := wq.NewWork(func() { runtime.Goexit() })
			q.Queue(w)
			mustReturn(t, "Flush of a Goexit item", func() { w.Flush() })
		}
		var ran atomic.Bool
		q.Queue(wq.NewWork(func() { ran.Store(true) }))
		waitFor(t, "rescuer restarted", ran.Load)
	})
	t.Run("no rescue while a worker runs", func(t *testing.T) {
		q := mustAlloc(t, "resq-d", wq.PerCPU|wq.MemReclaim, 0)
		// One worker busy spinning (counted as running), creation failing.
		spin := make(chan struct{})
		var spinning atomic.Bool
		q.QueueOn(0, wq.NewWork(func() {
			spinning.Store(true)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				select {
				case <-spin:
					return
				default:
				}
			}
		}))
		waitFor(t, "spinner", spinning.Load)
		fail.Store(true)
		var ran atomic.Bool
		q.QueueOn(0, wq.NewWork(func() { ran.Store(true) }))
		time.Sleep(50 * time.Millisecond)
		rescuedWhileRunning := q.Stats().Rescued
		close(spin)
		fail.Store(false)
		waitFor(t, "second item", ran.Load)
		// The spinner might have been marked CPU-intensive (it is not
		// counted then, so rescuing is allowed); only complain when it
		// was not.
		if rescuedWhileRunning > 0 && q.Stats().CPUItsv == 0 {
			t.Errorf("rescuer ran %d items while a concurrency-managed worker was running", rescuedWhileRunning)
		}
	})
}

// 6. Thread identity.
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

// 7. User callbacks on worker threads.
type goexitTracer struct {
	kind  wqtrace.Kind
	fn    string
	mode  string // "goexit" or "panic"
	fired atomic.Int32
}

func (g *goexitTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind != g.kind || !strings.Contains(ev.Function, g.fn) {
		return
	}
	if g.fired.Add(1) > 1 {
		return
	}
	if g.mode == "panic" {
		panic("tracer panic")
	}
	runtime.Goexit()
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

// 8. Races found by review.
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

func TestDrainKeepsFiredDelayedItems(t *testing.T) {
	q := mustAlloc(t, "drainfire", wq.Unbound, 0)
	var ran atomic.Int32
	var blocker sync.WaitGroup
	blocker.Add(1)
	q.Queue(wq.NewWork(func() { blocker.Wait() }))
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	q.QueueDelayed(dw, 2*time.Millisecond)
	go func() { time.Sleep(20 * time.Millisecond); blocker.Done() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.DrainContext(ctx); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 1 {
		t.Errorf("a delayed item that fired during Drain ran %d times, want 1", ran.Load())
	}
}

func nobodyCmd(t *testing.T, args []string, env ...string) (*exec.Cmd, string) {
	return testutil.NobodyCommand(t, args, env...)
}

func mustLookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

// Flush of a delayed item from its own function, with its timer re-armed:
// the item is queued and ErrDeadlock reported, no hang.
func TestDelayedSelfFlushArmed(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "selfflush", wq.Unbound, 0)
	var runs atomic.Int32
	var dw *wq.DelayedWork
	got := make(chan bool, 1)
	dw = wq.NewDelayedWork(func() {
		if runs.Add(1) == 1 {
			q.QueueDelayed(dw, time.Hour)
			got <- dw.Flush()
		}
	})
	q.QueueDelayed(dw, 0)
	var r bool
	mustReturn(t, "self Flush", func() { r = <-got })
	if r {
		t.Error("self Flush returned true")
	}
	waitFor(t, "second run", func() bool { return runs.Load() == 2 })
	if errs.count(wq.ErrDeadlock) != 1 {
		t.Errorf("ErrDeadlock reported %d times, want 1", errs.count(wq.ErrDeadlock))
	}
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
