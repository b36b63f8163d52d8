package kthread_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
)

// threadAttrs are the attributes that must not leak with a thread.
type threadAttrs struct {
	name string
	cpus []int
	attr sched.Attr
}

func (a threadAttrs) String() string { return fmt.Sprintf("%q cpus %v %+v", a.name, a.cpus, a.attr) }

func (a threadAttrs) equal(b threadAttrs) bool {
	return a.name == b.name && slices.Equal(a.cpus, b.cpus) && a.attr == b.attr
}

// readAttrs reads thread tid's attributes; false when it is gone.
func readAttrs(tid int) (threadAttrs, bool) {
	var a threadAttrs
	var err error
	if a.name, err = sched.ThreadName(tid); err != nil {
		return a, false
	}
	if a.cpus, err = sched.Affinity(tid); err != nil {
		return a, false
	}
	if a.attr, err = sched.GetAttr(tid); err != nil {
		return a, false
	}
	return a, true
}

// processAttrs are the main thread's attributes, which an escaped thread
// must get back.
func processAttrs(t *testing.T) threadAttrs {
	t.Helper()
	a, ok := readAttrs(os.Getpid())
	if !ok {
		t.Fatal("cannot read the main thread's attributes")
	}
	return a
}

// workerAttrs are the attributes a worker made by escapeWorker has.
func workerAttrs(wk *kthread.Worker, nice int) threadAttrs {
	name := wk.Name()
	if len(name) > 15 {
		name = name[:15]
	}
	return threadAttrs{name: name, cpus: []int{wk.CPU()}, attr: sched.Attr{Policy: sched.PolicyNormal, Nice: nice}}
}

// escapeWorker is a worker with a name, a CPU and a class of its own, so
// that a thread that escaped with them would show.
func escapeWorker(t *testing.T, name string, nice int) *kthread.Worker {
	t.Helper()
	cpus := wq.OnlineCPUs()
	wk, err := kthread.CreateWorkerOnCPU(cpus[len(cpus)-1], name, kthread.WithNice(nice))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wk.Destroy(); err != nil {
			t.Errorf("Destroy(%s): %v", name, err)
		}
	})
	return wk
}

// checkServes queues an item and checks that it runs on the worker's
// current thread, which has the worker's attributes.
func checkServes(t *testing.T, wk *kthread.Worker, want threadAttrs) {
	t.Helper()
	var c counter
	w := kthread.NewWork(c.fn)
	if !wk.QueueWork(w) {
		t.Fatalf("%s: QueueWork = false", wk.Name())
	}
	wk.FlushWork(w)
	tid := int(c.tid.Load())
	if c.n.Load() != 1 || tid != wk.TID() {
		t.Fatalf("%s: item ran %d times on thread %d, worker's thread is %d", wk.Name(), c.n.Load(), tid, wk.TID())
	}
	if got, ok := readAttrs(tid); !ok || !got.equal(want) {
		t.Errorf("%s: thread %d has %v, want %v", wk.Name(), tid, got, want)
	}
}

func unlock(n int) {
	for range n {
		runtime.UnlockOSThread()
	}
}

// TestStrayUnlockKeepsThread: a work function that calls
// runtime.UnlockOSThread fewer times than the worker's goroutine is
// locked (sched.LockDepth) only lowers the nesting count: the worker
// keeps its thread, its attributes, and reports nothing.
func TestStrayUnlockKeepsThread(t *testing.T) {
	errs := captureErrors(t)
	nice := testNice(t)
	for _, n := range []int{1, 2, 10, sched.LockDepth - 1} {
		wk := escapeWorker(t, fmt.Sprintf("kt-unlock%d", n), nice)
		tid := wk.TID()
		for range 3 { // again, on the same worker: the count keeps falling
			w := kthread.NewWork(func() { unlock(n) })
			wk.QueueWork(w)
			wk.FlushWork(w)
			checkServes(t, wk, workerAttrs(wk, nice))
			if n == sched.LockDepth-1 {
				break // one more call would make it escape
			}
		}
		if got := wk.TID(); got != tid {
			t.Errorf("unlock x%d: TID %d -> %d, want unchanged", n, tid, got)
		}
	}
	if got := errs.count(kthread.ErrThreadEscaped); got != 0 {
		t.Errorf("ErrThreadEscaped reported %d times: %v", got, errs.all())
	}
}

// leaveThread, called from a work function whose goroutine is no longer
// locked to its thread old, makes it leave old for good: it starts a
// goroutine, which the runtime runs next on this thread when the caller
// blocks, that locks old and holds it until release is closed. It returns
// false when it did not manage in 10 s.
func leaveThread(old int) (release chan struct{}, ok bool) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rel := make(chan struct{})
		got := make(chan int)
		go func() {
			runtime.LockOSThread()
			got <- sched.Gettid()
			<-rel
			runtime.UnlockOSThread()
		}()
		if <-got == old && sched.Gettid() != old {
			return rel, true
		}
		close(rel)
	}
	return nil, false
}

// TestUnlockEscapeRetiresThread: a work function that unlocks the
// worker's goroutine from its thread (sched.LockDepth calls or more, in
// one item or across several) and then leaves the thread (it blocked, and
// the Go scheduler ran it elsewhere and gave the thread to another
// goroutine) does not leave the worker's named, pinned, niced thread to
// the other goroutines: the worker reports ErrThreadEscaped (and
// ErrGoexit or the panic when the item ended so), the thread gets the
// process's name, affinity and class back, and the worker keeps serving
// on a new thread with its own attributes.
func TestUnlockEscapeRetiresThread(t *testing.T) {
	errs := captureErrors(t)
	var panics atomic.Int32
	kthread.SetPanicHandler(func(kthread.PanicInfo) { panics.Add(1) })
	t.Cleanup(func() { kthread.SetPanicHandler(nil) })
	nice := testNice(t)
	proc := processAttrs(t)
	// The process's name, CPUs and class; without the privilege to lower
	// a nice the escaped thread keeps the worker's (reported).
	repaired := proc
	if !mayLowerNice(proc.attr.Nice) {
		repaired.attr = sched.Attr{Policy: sched.PolicyNormal, Nice: nice}
	}
	var goexits, escapes int
	for _, c := range []struct {
		name   string
		before []int // unlock counts of the items run before
		unlock int   // unlock count of the item that leaves
		end    func()
		also   error
	}{
		{"depth", nil, sched.LockDepth, func() {}, nil},
		{"beyond", nil, 3 * sched.LockDepth, func() {}, nil},
		{"across-items", []int{sched.LockDepth - 1, 1}, 0, func() {}, nil},
		{"many-items", []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0, func() {}, nil},
		{"then-goexit", nil, sched.LockDepth, runtime.Goexit, kthread.ErrGoexit},
		{"then-panic", nil, sched.LockDepth, func() { panic("escaped and panicked") }, nil},
	} {
		wk := escapeWorker(t, "kt-esc-"+c.name, nice)
		old := wk.TID()
		for _, n := range c.before {
			w := kthread.NewWork(func() { unlock(n) })
			wk.QueueWork(w)
			wk.FlushWork(w)
		}
		if len(c.before) > 0 {
			// Drained but still on its thread: nothing has leaked yet.
			if got := wk.TID(); got != old {
				t.Errorf("%s: TID %d -> %d before the item left its thread", c.name, old, got)
			}
			checkServes(t, wk, workerAttrs(wk, nice))
		}
		var release chan struct{}
		var moved bool
		w := kthread.NewWork(func() {
			unlock(c.unlock)
			if release, moved = leaveThread(old); moved {
				c.end()
			}
		})
		wk.QueueWork(w)
		wk.FlushWork(w)
		if !moved {
			t.Fatalf("%s: could not make the work function leave its thread in 10 s", c.name)
		}
		escapes++
		if c.also == kthread.ErrGoexit {
			goexits++
		}
		waitFor(t, c.name+": the report", func() bool { return errs.count(kthread.ErrThreadEscaped) == escapes })
		// The old thread is alive (our goroutine holds it) and repaired.
		if a, alive := readAttrs(old); !alive || !a.equal(repaired) {
			t.Errorf("%s: escaped thread %d has %v (alive %v), want %v", c.name, old, a, alive, repaired)
		}
		// The replacement thread, while our goroutine still holds the old
		// one. FlushWork may have returned before the replacement started
		// (it returns false at once when the test goroutine was delayed
		// until the escaped item had finished), and once the old thread is
		// released the runtime may start the replacement on it (it is an
		// ordinary, repaired runtime thread by then): TID would stay old.
		waitFor(t, c.name+": a new thread", func() bool { tid := wk.TID(); return tid != 0 && tid != old })
		close(release)
		checkServes(t, wk, workerAttrs(wk, nice))
	}
	if got := errs.count(kthread.ErrThreadEscaped); got != escapes {
		t.Errorf("ErrThreadEscaped reported %d times, want %d: %v", got, escapes, errs.all())
	}
	if got := errs.count(kthread.ErrGoexit); got != goexits {
		t.Errorf("ErrGoexit reported %d times, want %d: %v", got, goexits, errs.all())
	}
	if n := panics.Load(); n != 1 {
		t.Errorf("panic handler called %d times, want 1", n)
	}
	if repaired.attr != proc.attr {
		for _, e := range errs.all() {
			if errors.Is(e, kthread.ErrThreadEscaped) && !strings.Contains(e.Error(), "keeps some of the worker's attributes") {
				t.Errorf("report does not say that the thread kept the worker's nice: %v", e)
			}
		}
	}
}

// TestDrainedThreadNeverLeaks: a work function drains the lock count but
// stays on the worker's thread; the thread then ends with its goroutine,
// never serving anybody else: after runtime.Goexit in the same item, or
// when the worker is destroyed.
func TestDrainedThreadNeverLeaks(t *testing.T) {
	errs := captureErrors(t)
	nice := testNice(t)
	proc := processAttrs(t)
	for _, goexit := range []bool{false, true} {
		wk := escapeWorker(t, fmt.Sprintf("kt-drained-%v", goexit), nice)
		old := wk.TID()
		w := kthread.NewWork(func() {
			unlock(2 * sched.LockDepth)
			if goexit {
				runtime.Goexit()
			}
		})
		wk.QueueWork(w)
		wk.FlushWork(w)
		checkServes(t, wk, workerAttrs(wk, nice))
		if goexit {
			if wk.TID() == old {
				t.Errorf("TID unchanged after runtime.Goexit")
			}
		} else if err := wk.Destroy(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the old thread to exit or get the process's attributes back", func() bool {
			a, alive := readAttrs(old)
			return !alive || a.equal(proc)
		})
	}
	if got := errs.count(kthread.ErrGoexit); got != 1 {
		t.Errorf("ErrGoexit reported %d times, want 1: %v", got, errs.all())
	}
}
