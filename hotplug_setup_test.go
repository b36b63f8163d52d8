package wq_test

import (
	"fmt"
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
