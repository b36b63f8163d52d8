package kthread_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

// ownFallbackSet is a PerCPU set with the fallback workqueue it allocates
// itself (wqfallback.Queue(nil)); it skips without the privilege for the
// fallback's nice -20.
func ownFallbackSet(t *testing.T, name string) (*kthread.PerCPU, *wq.Workqueue) {
	t.Helper()
	s, err := kthread.NewPerCPU(name, wqfallback.Queue(nil))
	if errors.Is(err, kthread.ErrPermission) {
		t.Skip("the fallback workqueue (UNBOUND|HIGHPRI) needs nice -20:", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, wqfallback.Workqueue(s.Fallback())
}

// offCPU is a CPU number with no worker in any set: items queued for it
// run on the set's fallback.
const offCPU = 1 << 20

// TestPerCPUDestroyFromOwnFallback: an item running on a PerCPU set's own
// fallback workqueue calls the set's Destroy. Destroy would destroy that
// workqueue, which waits for the item: it must return ErrDeadlock and
// change nothing (the set keeps serving, on its workers and its
// fallback), and a later Destroy from outside releases everything.
// Catches a Destroy that returned nil, destroyed the workers and left the
// fallback workqueue alive with nothing to release it.
func TestPerCPUDestroyFromOwnFallback(t *testing.T) {
	errs := captureErrors(t)
	s, fq := ownFallbackSet(t, "kt-lc-fbdestroy")
	got := make(chan error, 1)
	w := kthread.NewWork(func() { got <- s.Destroy() })
	if !s.Queue(offCPU, w) {
		t.Fatal("Queue on the fallback = false")
	}
	var err error
	select {
	case err = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("Destroy from the fallback item did not return")
	}
	if !errors.Is(err, kthread.ErrDeadlock) {
		t.Errorf("Destroy from an item on the set's own fallback = %v, want ErrDeadlock", err)
	}
	within(t, "FlushWork", func() { s.FlushWork(w) })
	if errs.count(kthread.ErrDeadlock) != 1 {
		t.Errorf("ErrDeadlock reported %d times, want 1: %v", errs.count(kthread.ErrDeadlock), errs.all())
	}
	// Nothing changed: the workers and the fallback still run items.
	for _, cpu := range append(s.CPUs(), offCPU) {
		var c counter
		w := kthread.NewWork(c.fn)
		if !s.Queue(cpu, w) {
			t.Fatalf("Queue(%d) after the refused Destroy = false", cpu)
		}
		within(t, "FlushWork", func() { s.FlushWork(w) })
		if c.n.Load() != 1 {
			t.Errorf("item for CPU %d ran %d times after the refused Destroy, want 1", cpu, c.n.Load())
		}
	}
	if s.Worker(s.CPUs()[0]) == nil {
		t.Error("the set lost its workers")
	}
	within(t, "Destroy", func() {
		if err := s.Destroy(); err != nil {
			t.Errorf("Destroy from outside: %v", err)
		}
	})
	for _, q := range wq.Queues(false) {
		if q == fq {
			t.Errorf("the fallback workqueue %s is still alive after the set's Destroy", fq.Name())
		}
	}
}

// TestPerCPUFallbackSelfWaits: the other waits from inside an item
// running on a set's fallback: FlushWork and CancelWorkSync of the item
// itself return (the wait would be for the caller) instead of hanging,
// and Destroy of a set whose fallback workqueue belongs to the caller
// (wqfallback.Queue(q)) does not wait for it and succeeds. Catches a wait
// from inside the fallback that deadlocks.
func TestPerCPUFallbackSelfWaits(t *testing.T) {
	captureErrors(t)
	wq.SetErrorHandler(func(op, fn string, err error) {}) // wq's ErrDeadlock reports
	t.Cleanup(func() { wq.SetErrorHandler(nil) })
	s, _ := ownFallbackSet(t, "kt-lc-fbself")
	defer func() { _ = s.Destroy() }()
	done := make(chan struct{})
	var w *kthread.Work
	w = kthread.NewWork(func() {
		defer close(done)
		s.FlushWork(w)
		s.CancelWorkSync(w)
	})
	s.Queue(offCPU, w)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("FlushWork or CancelWorkSync of itself from the fallback hangs")
	}
	within(t, "FlushWork", func() { s.FlushWork(w) })

	// A fallback workqueue of the caller's own is left to the caller:
	// Destroy from one of its items does not wait for it.
	fq := newFallback(t, "kt-lc-fbuser-wq")
	s2 := newPerCPU(t, "kt-lc-fbuser", fq)
	got := make(chan error, 1)
	s2.Queue(offCPU, kthread.NewWork(func() { got <- s2.Destroy() }))
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("Destroy from an item on a caller-owned fallback = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Destroy from an item on a caller-owned fallback hangs")
	}
}

// TestReplacementThreadWaitsForTheGate: a work function that ends its
// worker's thread (runtime.Goexit) while the thread gate refuses leaves
// the worker without a thread until the gate allows again: the refusal is
// reported (ErrThreadLimit), items queued meanwhile wait and then run
// once each, and Destroy returns. Catches a replacement started past the
// gate (the runtime aborts the process) or given up (items never run).
func TestReplacementThreadWaitsForTheGate(t *testing.T) {
	errs := captureErrors(t)
	var refuse atomic.Bool
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/test", Max: 10, Current: 10}
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		if refuse.Load() {
			return 0, lim, nil
		}
		return 1 << 20, sched.ThreadLimit{}, nil
	})
	defer restore()
	wk, err := kthread.CreateWorker("kt-lc-respawn")
	if err != nil {
		t.Fatal(err)
	}
	wk.QueueWork(kthread.NewWork(func() {
		refuse.Store(true)
		runtime.Goexit()
	}))
	var c counter
	w := kthread.NewWork(c.fn)
	wk.QueueWork(w)
	waitFor(t, "the refusal report", func() bool { return errs.count(kthread.ErrThreadLimit) == 1 })
	time.Sleep(30 * time.Millisecond)
	if n := c.n.Load(); n != 0 {
		t.Fatalf("an item ran %d times with no thread", n)
	}
	refuse.Store(false)
	within(t, "FlushWork", func() { wk.FlushWork(w) })
	if n := c.n.Load(); n != 1 {
		t.Errorf("the item queued while the gate refused ran %d times, want 1", n)
	}
	within(t, "Destroy", func() {
		if err := wk.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
}

func TestGoexitReplacesThread(t *testing.T) {
	errs := captureErrors(t)
	cpu := wq.OnlineCPUs()[0]
	nice := testNice(t)
	wk, err := kthread.CreateWorkerOnCPU(cpu, "kt-goexit", kthread.WithNice(nice))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wk.Destroy() })
	oldTID := wk.TID()
	x := kthread.NewWork(runtime.Goexit)
	var c counter
	y := kthread.NewWork(c.fn)
	wk.QueueWork(x)
	wk.QueueWork(y)
	// A flush of the Goexit item is released normally.
	wk.FlushWork(x)
	wk.FlushWork(y)
	if c.n.Load() != 1 {
		t.Fatal("worker stalled after runtime.Goexit")
	}
	newTID := wk.TID()
	if newTID == oldTID || int(c.tid.Load()) != newTID {
		t.Errorf("TID before %d, after %d, item ran on %d; want a new thread", oldTID, newTID, c.tid.Load())
	}
	if got := errs.count(kthread.ErrGoexit); got != 1 {
		t.Errorf("ErrGoexit reported %d times, want 1", got)
	}
	// The replacement has the same name, affinity and class.
	if name, _ := sched.ThreadName(newTID); name != fmt.Sprintf("kt-goexit/%d", cpu) {
		t.Errorf("replacement thread name %q", name)
	}
	if aff, err := sched.Affinity(newTID); err != nil || !slices.Equal(aff, []int{cpu}) {
		t.Errorf("replacement affinity %v (%v), want [%d]", aff, err, cpu)
	}
	if a, err := sched.GetAttr(newTID); err != nil || a.Policy != sched.PolicyNormal || a.Nice != nice {
		t.Errorf("replacement attr %+v (%v), want nice %d", a, err, nice)
	}
	waitFor(t, "the old thread to exit", func() bool { return !sched.ProcessAlive(oldTID) })
	if err := wk.Destroy(); err != nil {
		t.Fatal(err)
	}
}
