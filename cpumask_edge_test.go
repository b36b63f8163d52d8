package wq_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/topology"
)

// TestAllocDuringSetUnboundCPUMaskUsesFinalMask catches an Alloc that
// races SetUnboundCPUMask and keeps the global mask that was replaced: the
// new queue computed its pools from the old mask but registered after
// SetUnboundCPUMask had listed the live queues to re-apply, so nothing
// ever re-applied the new mask to it (the kernel holds wq_pool_mutex
// across alloc_workqueue's apply and its list_add).
func TestAllocDuringSetUnboundCPUMaskUsesFinalMask(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	c0, c1 := online[0], online[1]
	defer wq.SetUnboundCPUMask(nil)
	// Live strict unbound queues make SetUnboundCPUMask probe several
	// threads between listing the queues and storing the mask.
	for i := range 4 {
		q := mustAlloc(t, fmt.Sprintf("mask-race-bg%d", i), wq.Unbound, 0)
		if err := q.SetAffinityStrict(true); err != nil {
			t.Fatal(err)
		}
		if err := q.SetAffinityScope(wq.ScopeCPU); err != nil {
			t.Fatal(err)
		}
	}
	masks := [][]int{{c0}, {c1}}
	for i := range 200 {
		mask := masks[i%2]
		var q *wq.Workqueue
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := wq.SetUnboundCPUMask(mask); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			var err error
			q, err = wq.Alloc("mask-race", wq.Unbound, 0)
			if err != nil {
				t.Error(err)
			}
		}()
		wg.Wait()
		if q == nil {
			t.FailNow()
		}
		got := effectivePoolCPUs(t, q)
		q.Destroy()
		if !slices.Equal(got, mask) {
			t.Fatalf("iteration %d: queue allocated while the global mask became %v uses %v", i, mask, got)
		}
	}
}

// TestSetUnboundCPUMaskRefusesOutOfRangeCPUs catches SetUnboundCPUMask
// accepting CPU ids that cannot name a CPU (negative, or at or above
// topology.MaxCPUs) by dropping them silently, where SetCPUMask and
// ApplyAttrs refuse them: bad input must be refused with
// ErrInvalidArgument and change nothing, as the kernel's cpumask_parse
// refuses bits beyond nr_cpumask_bits.
func TestSetUnboundCPUMaskRefusesOutOfRangeCPUs(t *testing.T) {
	online := wq.OnlineCPUs()
	defer wq.SetUnboundCPUMask(nil)
	before, err := wq.GlobalAttr("cpumask")
	if err != nil {
		t.Fatal(err)
	}
	for _, cpus := range [][]int{
		{online[0], -1},
		{online[0], topology.MaxCPUs},
		{online[0], 1 << 40},
	} {
		if err := wq.SetUnboundCPUMask(cpus); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetUnboundCPUMask(%v) = %v, want ErrInvalidArgument", cpus, err)
		}
		if got, _ := wq.GlobalAttr("cpumask"); got != before {
			t.Errorf("refused SetUnboundCPUMask(%v) changed the global cpumask from %s to %s", cpus, before, got)
		}
	}
}
