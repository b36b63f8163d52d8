package wq_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/topology"
)

// effectivePoolCPUs returns the CPUs of the pools serving each online
// CPU of q (they must agree for a non-strict queue).
func effectivePoolCPUs(t *testing.T, q *wq.Workqueue) []int {
	t.Helper()
	var got []int
	for i, c := range wq.OnlineCPUs() {
		cpus := slices.Clone(q.PoolCPUs(c))
		slices.Sort(cpus)
		if i > 0 && !slices.Equal(cpus, got) {
			t.Fatalf("%s: pool of CPU %d uses %v, another %v", q.Name(), c, cpus, got)
		}
		got = cpus
	}
	return got
}

// TestQueueCPUMaskIntersectsUnboundCPUMask catches an unbound queue with
// its own cpumask ignoring the global unbound cpumask: the queue's
// workers must use the intersection of both, and the global mask alone
// when the intersection is empty (wq_calc_pod_cpumask), at Alloc, on an
// attribute write, and when SetUnboundCPUMask re-applies to live queues.
func TestQueueCPUMaskIntersectsUnboundCPUMask(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	c0, c1 := online[0], online[1]
	defer wq.SetUnboundCPUMask(nil)

	all := mustAlloc(t, "mask-all", wq.Unbound, 0) // own mask: every CPU
	if err := all.SetCPUMask(online); err != nil {
		t.Fatal(err)
	}
	only1 := mustAlloc(t, "mask-1", wq.Unbound, 0) // own mask disjoint from the global one below
	if err := only1.SetCPUMask([]int{c1}); err != nil {
		t.Fatal(err)
	}
	none := mustAlloc(t, "mask-none", wq.Unbound, 0) // no own mask
	strict := mustAlloc(t, "mask-strict", wq.Unbound, 0)
	if err := strict.SetCPUMask(online); err != nil {
		t.Fatal(err)
	}
	if err := strict.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}

	// SetUnboundCPUMask re-applies to the live queues.
	if err := wq.SetUnboundCPUMask([]int{c0}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    *wq.Workqueue
		want []int
	}{{all, []int{c0}}, {only1, []int{c0}}, {none, []int{c0}}} {
		if got := effectivePoolCPUs(t, c.q); !slices.Equal(got, c.want) {
			t.Errorf("after SetUnboundCPUMask([%d]): %s (own %v) workers on %v, want %v", c0, c.q.Name(), c.q.Attrs().CPUs, got, c.want)
		}
	}
	for _, c := range online {
		if got := strict.PoolCPUs(c); !slices.Equal(got, []int{c0}) {
			t.Errorf("strict queue: pool of CPU %d uses %v, want [%d]", c, got, c0)
		}
	}
	// The queue's own mask reads back as written: the intersection is
	// what the workers use, not what the attribute holds.
	if got := all.Attrs().CPUs; !slices.Equal(got, online) {
		t.Errorf("own cpumask read back as %v, want %v", got, online)
	}

	// Alloc under a global mask.
	late := mustAlloc(t, "mask-late", wq.Unbound, 0)
	if got := effectivePoolCPUs(t, late); !slices.Equal(got, []int{c0}) {
		t.Errorf("queue allocated under global mask [%d]: workers on %v", c0, got)
	}
	// An attribute write under a global mask.
	if err := late.SetCPUMask(online); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, late); !slices.Equal(got, []int{c0}) {
		t.Errorf("SetCPUMask(%v) under global mask [%d]: workers on %v", online, c0, got)
	}
	if err := late.SetCPUMask([]int{c1}); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, late); !slices.Equal(got, []int{c0}) {
		t.Errorf("SetCPUMask([%d]) under global mask [%d]: workers on %v, want the global mask", c1, c0, got)
	}

	// A global mask that overlaps: the intersection.
	if err := wq.SetUnboundCPUMask([]int{c1}); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, all); !slices.Equal(got, []int{c1}) {
		t.Errorf("global [%d], own %v: workers on %v", c1, online, got)
	}
	if got := effectivePoolCPUs(t, only1); !slices.Equal(got, []int{c1}) {
		t.Errorf("global [%d], own [%d]: workers on %v", c1, c1, got)
	}

	// Restored: the own masks alone.
	if err := wq.SetUnboundCPUMask(nil); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, all); !slices.Equal(got, online) {
		t.Errorf("global restored: %s workers on %v, want %v", all.Name(), got, online)
	}
	if got := effectivePoolCPUs(t, only1); !slices.Equal(got, []int{c1}) {
		t.Errorf("global restored: %s workers on %v, want [%d]", only1.Name(), got, c1)
	}
}

// TestQueueCPUMaskIntersectionAcrossHotplug catches a hotplug rebuild of
// an unbound queue's pools that ignores the global unbound cpumask: the
// effective mask is recomputed from both masks when a CPU leaves and
// when it returns.
func TestQueueCPUMaskIntersectionAcrossHotplug(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	c0, c1 := online[0], online[len(online)-1]
	real, err := (&topology.SysfsSource{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	var rest []int
	for _, c := range online {
		if c != c1 {
			rest = append(rest, c)
		}
	}
	reduced := topology.NewStatic(topology.NewCPUSet(rest...), nil, nil, nil)
	t.Cleanup(func() { _ = wq.SetTopologySource(nil) })
	defer wq.SetUnboundCPUMask(nil)

	q := mustAlloc(t, "mask-hotplug", wq.Unbound, 0)
	if err := q.SetCPUMask(online); err != nil {
		t.Fatal(err)
	}
	if err := wq.SetUnboundCPUMask([]int{c1}); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, q); !slices.Equal(got, []int{c1}) {
		t.Fatalf("global [%d], own %v: workers on %v", c1, online, got)
	}
	// CPU c1 leaves: the global mask has no online CPU, so every online
	// CPU of the queue's own mask is used.
	if err := wq.SetTopologySource(&topology.StaticSource{T: reduced}); err != nil {
		t.Fatal(err)
	}
	if got := q.PoolCPUs(c0); !slices.Equal(got, rest) {
		t.Errorf("CPU %d offline: workers on %v, want %v", c1, got, rest)
	}
	// It returns: the intersection again, not the queue's own mask.
	if err := wq.SetTopologySource(&topology.StaticSource{T: real}); err != nil {
		t.Fatal(err)
	}
	if got := effectivePoolCPUs(t, q); !slices.Equal(got, []int{c1}) {
		t.Errorf("CPU %d back: workers on %v, want [%d]", c1, got, c1)
	}
}

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
