package wq_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/topology"
)

// A CPU that returns while a new worker of its per-CPU pool sets its
// thread up (between the read of the pool's CPUs and their application)
// must not leave that worker on the CPUs of the disassociated pool.
// Catches a setup that applies the CPUs it read after applyTopology had
// already moved its thread to the new ones (TestHotplugInjected failed so
// under load: "worker after rebind has affinity [0], want [1]").
func TestHotplugDuringWorkerSetup(t *testing.T) {
	cpu, _, real, reduced := hotplugTopologies(t)
	q := mustAlloc(t, "hotplug-setup", wq.PerCPU, 2)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	blocker := func() { started <- struct{}{}; <-release }
	defer close(release)
	// First blocker: its worker starts, and makes a spare worker.
	q.QueueOn(cpu, wq.NewWork(blocker))
	<-started
	waitFor(t, "the spare worker", func() bool { return idleWorkers(q, cpu) >= 1 })
	// Second blocker: the spare is woken and held before it takes the
	// item, so it makes the next spare only after the CPU left.
	idleBefore := idleWorkers(q, cpu)
	hold := wq.HoldWakeups(q, cpu)
	q.QueueOn(cpu, wq.NewWork(blocker))
	time.Sleep(10 * time.Millisecond) // the spare is woken and held
	if err := wq.SetTopologySource(&topology.StaticSource{T: reduced}); err != nil {
		t.Fatal(err)
	}
	// The CPU returns during that spare's setup.
	var once sync.Once
	var ran atomic.Bool
	restore := wq.SetSetupHook(q, cpu, func() {
		once.Do(func() {
			if err := wq.SetTopologySource(&topology.StaticSource{T: real}); err != nil {
				t.Error(err)
			}
			ran.Store(true)
		})
	})
	defer restore()
	hold()
	<-started
	waitFor(t, fmt.Sprintf("the CPU's return during a new worker's setup (idle workers before the hold: %d)", idleBefore), ran.Load)
	restore()
	if got := q.PoolCPUs(cpu); !slices.Equal(got, []int{cpu}) {
		t.Fatalf("pool of CPU %d after its return: CPUs %v", cpu, got)
	}
	// The new worker may still be in its setup: its CPUs must become the
	// pool's, and stay so.
	var wrong []string
	for deadline := time.Now().Add(testutil.Timeout); ; time.Sleep(time.Millisecond) {
		wrong = wrong[:0]
		for _, tid := range workerTIDs(q, cpu) {
			if aff, _ := sched.Affinity(tid); !slices.Equal(aff, []int{cpu}) {
				wrong = append(wrong, fmt.Sprintf("worker %d on %v", tid, aff))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(wrong) > 0 {
		t.Errorf("%v after CPU %d returned, workers of its pool are not bound to it: %v", testutil.Timeout, cpu, wrong)
	}
}

// idleWorkers returns the idle workers of the pool serving q on cpu.
func idleWorkers(q *wq.Workqueue, cpu int) int {
	n := 0
	for _, p := range wq.Pools() {
		if p.ID != q.PoolIDs()[cpu] {
			continue
		}
		for _, w := range p.Workers {
			if w.Idle {
				n++
			}
		}
	}
	return n
}

// workerTIDs returns the thread ids of the workers of the pool serving q
// on cpu.
func workerTIDs(q *wq.Workqueue, cpu int) []int {
	var tids []int
	for _, p := range wq.Pools() {
		if p.ID == q.PoolIDs()[cpu] {
			for _, w := range p.Workers {
				tids = append(tids, w.TID)
			}
		}
	}
	return tids
}

// TestHotplugInjected takes CPU 1 away through an injected topology: the
// per-CPU pool of CPU 1 is disassociated (its workers may run on CPU 0),
// its pending item still runs, and it is rebound when the CPU returns.
func TestHotplugInjected(t *testing.T) {
	cpu, rest, real, reduced := hotplugTopologies(t)
	var changes atomic.Int32
	cancel := wq.OnCPUChange(func([]int) { changes.Add(1) })
	defer cancel()

	q := mustAlloc(t, "hotplug", wq.PerCPU, 1)
	release := make(chan struct{})
	var firstCPU atomic.Int32
	firstCPU.Store(-1)
	blocker := wq.NewWork(func() { firstCPU.Store(int32(wq.GetCPU())); <-release })
	q.QueueOn(cpu, blocker)
	waitFor(t, "the blocker to start", func() bool { return firstCPU.Load() >= 0 })
	var ranOn atomic.Int32
	ranOn.Store(-1)
	pending := wq.NewWork(func() { ranOn.Store(int32(wq.GetCPU())) })
	q.QueueOn(cpu, pending) // waits behind max_active 1

	if err := wq.SetTopologySource(&topology.StaticSource{T: reduced}); err != nil {
		t.Fatal(err)
	}
	if changes.Load() == 0 {
		t.Error("OnCPUChange subscriber not called")
	}
	if got := wq.OnlineCPUs(); slices.Contains(got, cpu) {
		t.Fatalf("OnlineCPUs %v still has CPU %d", got, cpu)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, rest) {
		t.Errorf("pool of offline CPU %d: CPUs %v, want %v (disassociated)", cpu, got, rest)
	}
	close(release)
	pending.Flush()
	if c := int(ranOn.Load()); !slices.Contains(rest, c) {
		t.Errorf("pending item of offline CPU %d ran on CPU %d, want one of %v", cpu, c, rest)
	}
	// The CPU comes back: the pool is bound to it again.
	if err := wq.SetTopologySource(&topology.StaticSource{T: real}); err != nil {
		t.Fatal(err)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, []int{cpu}) {
		t.Errorf("pool after CPU %d returned: CPUs %v", cpu, got)
	}
	tid := workerTID(t, q, cpu)
	if aff, _ := sched.Affinity(tid); !slices.Equal(aff, []int{cpu}) {
		t.Errorf("worker %d after rebind has affinity %v, want [%d]", tid, aff, cpu)
	}
}

// TestHotplugRealAffinity narrows the process's affinity from outside (as
// taskset -p does: the main thread's mask) and checks that Rescan sees it
// and disassociates the per-CPU pool, and rebinds it once restored.
func TestHotplugRealAffinity(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	cpu := online[len(online)-1]
	orig, err := sched.Affinity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	q := mustAlloc(t, "hotplug-real", wq.PerCPU, 0)
	workerTID(t, q, cpu) // make the pool's workers exist
	t.Cleanup(func() {
		_ = sched.SetAffinity(os.Getpid(), orig)
		_ = wq.Rescan()
	})
	if err := sched.SetAffinity(os.Getpid(), online[:len(online)-1]); err != nil {
		t.Skipf("cannot narrow the process affinity: %v", err)
	}
	if err := wq.Rescan(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(wq.OnlineCPUs(), cpu) {
		t.Fatalf("Rescan did not notice CPU %d leaving the process's affinity", cpu)
	}
	if got := q.PoolCPUs(cpu); slices.Contains(got, cpu) {
		t.Errorf("pool of CPU %d still bound to it: %v", cpu, got)
	}
	ran := make(chan int, 1)
	q.QueueOn(cpu, wq.NewWork(func() { ran <- wq.GetCPU() }))
	select {
	case c := <-ran:
		if c == cpu {
			t.Errorf("item for the departed CPU %d ran on it", cpu)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("item queued on the departed CPU was stranded")
	}
	_ = sched.SetAffinity(os.Getpid(), orig)
	if err := wq.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, []int{cpu}) {
		t.Errorf("pool after restore: %v", got)
	}
}
