package kthread_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
	"go.uber.org/goleak"
)

// workerTIDs returns the thread ids of the set's workers.
func workerTIDs(s *kthread.PerCPU) []int {
	var out []int
	for _, c := range s.CPUs() {
		out = append(out, s.Worker(c).TID())
	}
	return out
}

func TestPerCPUOneWorkerPerCPU(t *testing.T) {
	var s *kthread.PerCPU
	if sched.CheckNice(-20) == nil {
		s = newPerCPU(t, "kt-pcpu", nil) // its own UNBOUND|HIGHPRI fallback
		if f := wqfallback.Workqueue(s.Fallback()); f == nil || f.Flags()&(wq.Unbound|wq.HighPri) != wq.Unbound|wq.HighPri {
			t.Errorf("default fallback %v, want an UNBOUND|HIGHPRI workqueue", f)
		}
	} else {
		s = newPerCPU(t, "kt-pcpu", newFallback(t, "kt-pcpu-fb"))
	}
	online := wq.OnlineCPUs()
	if got := s.CPUs(); !slices.Equal(got, online) {
		t.Fatalf("CPUs() = %v, want the online CPUs %v", got, online)
	}
	for _, cpu := range online {
		wk := s.Worker(cpu)
		if wk == nil {
			t.Fatalf("no worker for online CPU %d", cpu)
		}
		if aff, err := sched.Affinity(wk.TID()); err != nil || !slices.Equal(aff, []int{cpu}) {
			t.Errorf("CPU %d worker affinity %v (%v)", cpu, aff, err)
		}
		if name, _ := sched.ThreadName(wk.TID()); name != fmt.Sprintf("kt-pcpu/%d", cpu) {
			t.Errorf("CPU %d worker thread name %q", cpu, name)
		}
		var c counter
		w := kthread.NewWork(c.fn)
		if !s.Queue(cpu, w) {
			t.Fatalf("Queue(%d) = false", cpu)
		}
		s.FlushWork(w)
		if c.n.Load() != 1 || int(c.tid.Load()) != wk.TID() {
			t.Errorf("Queue(%d): %d runs, on thread %d, want 1 on %d", cpu, c.n.Load(), c.tid.Load(), wk.TID())
		}
	}
	var c counter
	w := kthread.NewWork(c.fn)
	if !s.QueueLocal(w) {
		t.Fatal("QueueLocal = false")
	}
	s.FlushWork(w)
	if c.n.Load() != 1 || !slices.Contains(workerTIDs(s), int(c.tid.Load())) {
		t.Errorf("QueueLocal: %d runs on thread %d, not a worker of the set", c.n.Load(), c.tid.Load())
	}
	if s.Worker(-1) != nil || s.Worker(1<<20) != nil {
		t.Error("Worker(out of range) != nil")
	}
}

func TestPerCPUFallback(t *testing.T) {
	errs := captureErrors(t)
	s := newPerCPU(t, "kt-pfb", newFallback(t, "kt-pfb-wq"))
	tids := workerTIDs(s)

	var c counter
	w := kthread.NewWork(c.fn)
	for _, cpu := range []int{-1, 1 << 20} {
		if !s.Queue(cpu, w) {
			t.Fatalf("Queue(%d) = false", cpu)
		}
		s.FlushWork(w)
	}
	if c.n.Load() != 2 {
		t.Fatalf("fallback runs %d, want 2", c.n.Load())
	}
	tid := int(c.tid.Load())
	if slices.Contains(tids, tid) {
		t.Errorf("item for a CPU without worker ran on worker thread %d", tid)
	}
	if name, _ := sched.ThreadName(tid); !strings.HasPrefix(name, "kworker/u") {
		t.Errorf("item ran on thread %q, want an unbound kworker of the fallback", name)
	}

	// Running on the fallback: a requeue goes behind it (never beside it),
	// a second one is "already pending", also when aimed at a CPU worker.
	started, release := make(chan struct{}, 4), make(chan struct{})
	var runs, concurrent, inside atomic.Int32
	r := kthread.NewWork(func() {
		if inside.Add(1) > 1 {
			concurrent.Add(1)
		}
		runs.Add(1)
		started <- struct{}{}
		<-release
		inside.Add(-1)
	})
	s.Queue(-1, r)
	<-started
	if !kthread.OnFallback(r) {
		t.Fatal("item queued for CPU -1 is not on the fallback")
	}
	if !s.Queue(-1, r) {
		t.Error("Queue(running on fallback) = false, want true")
	}
	if s.Queue(-1, r) || s.Queue(s.CPUs()[0], r) {
		t.Error("Queue(pending on fallback) = true")
	}
	close(release)
	s.FlushWork(r)
	waitFor(t, "both runs", func() bool { return runs.Load() == 2 })
	s.FlushWork(r)
	if concurrent.Load() != 0 {
		t.Error("item ran concurrently with itself")
	}
	// Idle again: it may go back to a CPU worker.
	cpu := s.CPUs()[0]
	var c2 counter
	r.Init(c2.fn)
	if !s.Queue(cpu, r) {
		t.Fatal("Queue(idle item from the fallback) = false")
	}
	s.FlushWork(r)
	if int(c2.tid.Load()) != s.Worker(cpu).TID() {
		t.Error("item did not move back to the CPU worker")
	}
	if n := len(errs.all()); n != 0 {
		t.Errorf("unexpected errors: %v", errs.all())
	}
}

func TestPerCPUHotplug(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skipf("needs 2 online CPUs, have %v", online)
	}
	errs := captureErrors(t)
	s := newPerCPU(t, "kt-hp", newFallback(t, "kt-hp-wq"))
	leaving := online[len(online)-1]
	rest := online[:len(online)-1]
	old := s.Worker(leaving)
	oldTID := old.TID()

	// Fill the leaving CPU's worker with items behind a gate.
	g := block(t, old)
	const n = 20
	var cs [n]counter
	items := make([]*kthread.Work, n)
	for i := range items {
		items[i] = kthread.NewWork(cs[i].fn)
		if !s.Queue(leaving, items[i]) {
			t.Fatalf("Queue(%d, item %d) = false", leaving, i)
		}
	}

	s.ApplyOnline(rest) // the CPU leaves
	if s.Worker(leaving) != nil {
		t.Fatal("offline CPU still has a worker")
	}
	if got := s.CPUs(); !slices.Equal(got, rest) {
		t.Errorf("CPUs() = %v, want %v", got, rest)
	}
	// Items queued meanwhile go to the fallback.
	var c counter
	x := kthread.NewWork(c.fn)
	if !s.Queue(leaving, x) {
		t.Fatal("Queue(offline CPU) = false")
	}
	s.FlushWork(x)
	if c.n.Load() != 1 || int(c.tid.Load()) == oldTID || slices.Contains(workerTIDs(s), int(c.tid.Load())) {
		t.Errorf("item for the offline CPU: %d runs on thread %d, want the fallback", c.n.Load(), c.tid.Load())
	}
	// An item still pending on the retiring worker is "already pending".
	if s.Queue(leaving, items[0]) || s.Queue(rest[0], items[0]) {
		t.Error("Queue(pending on the retiring worker) = true")
	}

	// Nothing queued before is lost: the retiring worker runs it all.
	g.open()
	s.WaitRetired()
	for i := range cs {
		if cs[i].n.Load() != 1 || int(cs[i].tid.Load()) != oldTID {
			t.Fatalf("item %d: %d runs on %d, want 1 on the retired worker %d", i, cs[i].n.Load(), cs[i].tid.Load(), oldTID)
		}
	}
	if old.QueueWork(kthread.NewWork(func() {})) {
		t.Error("retired worker accepted work")
	}
	if errs.count(kthread.ErrDestroyed) != 1 {
		t.Errorf("queue on the retired worker: errors %v, want one ErrDestroyed", errs.all())
	}

	s.ApplyOnline(online) // the CPU returns
	nw := s.Worker(leaving)
	if nw == nil || nw == old {
		t.Fatal("no new worker after the CPU came back")
	}
	if aff, err := sched.Affinity(nw.TID()); err != nil || !slices.Equal(aff, []int{leaving}) {
		t.Errorf("new worker affinity %v (%v), want [%d]", aff, err, leaving)
	}
	// An item attached to the retired worker moves to the new one.
	if !s.Queue(leaving, items[0]) {
		t.Fatal("Queue(item of the retired worker) = false")
	}
	s.FlushWork(items[0])
	if cs[0].n.Load() != 2 || int(cs[0].tid.Load()) != nw.TID() {
		t.Errorf("item ran %d times, last on %d; want 2, last on the new worker %d", cs[0].n.Load(), cs[0].tid.Load(), nw.TID())
	}
}

func TestPerCPUFIFOLow(t *testing.T) {
	needRT(t)
	s := newPerCPU(t, "kt-hipri", newFallback(t, "kt-hipri-wq"), kthread.WithFIFOLow())
	for _, cpu := range s.CPUs() {
		checkAttr(t, s.Worker(cpu), sched.Attr{Policy: sched.PolicyFIFO, Priority: 1})
	}
}

func TestPerCPUDestroy(t *testing.T) {
	errs := captureErrors(t)
	s, err := kthread.NewPerCPU("kt-pdes", wqfallback.Queue(newFallback(t, "kt-pdes-wq")))
	if err != nil {
		t.Fatal(err)
	}
	cpu := s.CPUs()[0]
	g := block(t, s.Worker(cpu))
	var cs [10]counter
	for i := range cs {
		s.Queue(cpu, kthread.NewWork(cs[i].fn))
	}
	res := make(chan error)
	go func() { res <- s.Destroy() }()
	waitFor(t, "the set's destroy to begin", func() bool { return s.Worker(cpu) == nil })
	g.open()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	for i := range cs {
		if cs[i].n.Load() != 1 {
			t.Fatalf("item %d ran %d times when Destroy returned", i, cs[i].n.Load())
		}
	}
	w := kthread.NewWork(func() {})
	if s.Queue(cpu, w) || s.Queue(-1, w) || s.QueueLocal(w) {
		t.Error("Queue after Destroy = true")
	}
	if errs.count(kthread.ErrDestroyed) != 1 {
		t.Errorf("errors %v, want one ErrDestroyed", errs.all())
	}
	if err := s.Destroy(); err != nil {
		t.Errorf("second Destroy = %v", err)
	}
	if _, err := kthread.NewPerCPU("", wqfallback.Queue(nil)); !errors.Is(err, kthread.ErrInvalidArgument) {
		t.Errorf("NewPerCPU(\"\") = %v", err)
	}
	if _, err := kthread.NewPerCPU("kt-pdes-nil", nil); !errors.Is(err, kthread.ErrInvalidArgument) {
		t.Errorf("NewPerCPU with a nil fallback = %v, want ErrInvalidArgument", err)
	}
}

func TestPerCPUOtherWorker(t *testing.T) {
	errs := captureErrors(t)
	s := newPerCPU(t, "kt-pow", newFallback(t, "kt-pow-wq"))
	solo := newWorker(t, "kt-solo")
	g := block(t, solo)
	w := kthread.NewWork(func() {})
	solo.QueueWork(w)
	if s.Queue(s.CPUs()[0], w) {
		t.Error("PerCPU.Queue of an item pending on an outside worker = true")
	}
	if errs.count(kthread.ErrOtherWorker) != 1 {
		t.Errorf("errors %v, want one ErrOtherWorker", errs.all())
	}
	g.open()
	solo.FlushWorker()
}

// TestPerCPUDestroyArmedDelayed: delayed items armed directly on a PerCPU
// set's workers are cancelled by the set's Destroy too, reported, and left
// idle.
func TestPerCPUDestroyArmedDelayed(t *testing.T) {
	s, err := kthread.NewPerCPU("kt-dd-pcpu", wqfallback.Queue(newFallback(t, "kt-dd-pcpu-wq")))
	if err != nil {
		t.Fatal(err)
	}
	var dws []*kthread.DelayedWork
	for _, cpu := range s.CPUs() {
		for range 2 {
			dw := kthread.NewDelayedWork(func() {})
			s.Worker(cpu).QueueDelayedWork(dw, time.Hour)
			dws = append(dws, dw)
		}
	}
	var derr error
	within(t, "Destroy", func() { derr = s.Destroy() })
	if !errors.Is(derr, kthread.ErrDelayedPending) {
		t.Errorf("Destroy = %v, want ErrDelayedPending", derr)
	}
	for i, dw := range dws {
		if dw.Pending() {
			t.Errorf("item %d pending after Destroy", i)
		}
	}
}

// A PerCPU set and its default-queue fallback (a goroutine-backed pool)
// leave no goroutine behind once both are destroyed: the fallback
// queue's last put marks its pool dead and waits for every worker it
// started. What can keep such a pool alive is another live queue of the
// same attributes (it shares the pool); then this test fails at once.
func TestPerCPUAndDefaultFallbackLeaveNoGoroutine(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	for round := range 5 {
		q, err := wq.Alloc("kt-leak-fb", wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := kthread.NewPerCPU("kt-leak", wqfallback.Queue(q))
		if err != nil {
			q.Destroy()
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for _, cpu := range s.CPUs() {
			for range 4 {
				wg.Add(2)
				s.Queue(cpu, kthread.NewWork(wg.Done))
				q.Queue(wq.NewWork(wg.Done))
			}
		}
		within(t, "the items", wg.Wait)
		within(t, "Destroy", func() {
			if err := s.Destroy(); err != nil {
				t.Error(err)
			}
			q.Destroy()
		})
		if err := goleak.Find(ignore); err != nil {
			t.Fatalf("round %d: goroutines left after Destroy of the set and its fallback: %v", round, err)
		}
	}
}

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
