package wq

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gowq/wq/internal/topology"
)

// installedCPUs returns the distinct CPU lists of the pools in q's
// current table.
func installedCPUs(q *Workqueue) []string {
	t := q.table.Load()
	seen := map[string]bool{}
	add := func(pq *pwq) {
		if pq != nil {
			seen[topology.NewCPUSet(pq.pool.cpus...).String()] = true
		}
	}
	for _, pq := range t.cpu {
		add(pq)
	}
	add(t.dfl)
	for _, pq := range t.pods {
		add(pq)
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestWorkerCPUsMatchInstalledPools: the CPU lists that attribute writes
// probe (workerCPUs) are exactly those of the pools installTable builds,
// for per-CPU, unbound and ordered queues, every scope, strict or not,
// with and without a queue cpumask and a global unbound mask, on the real
// topology and on a 4-CPU one with two caches. (installTable is written
// directly here, without the probes: the fake CPUs do not exist.)
func TestWorkerCPUsMatchInstalledPools(t *testing.T) {
	four := topology.NewStatic(topology.NewCPUSet(0, 1, 2, 3), nil, func(c int) int { return c / 2 }, nil)
	for ti, topo := range []*topology.Topology{currentTopology(), four} {
		pq, err := Alloc("wcpus-percpu", PerCPU, 0)
		if err != nil {
			t.Fatal(err)
		}
		uq, err := Alloc("wcpus-unbound", Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		oq, err := AllocOrdered("wcpus-ordered", 0)
		if err != nil {
			t.Fatal(err)
		}
		check := func(q *Workqueue, a queueAttrs, g *topology.CPUSet) {
			t.Helper()
			q.mu.Lock()
			defer q.mu.Unlock()
			unboundMask.Store(g)
			q.attrs = a
			q.installTable(topo)
			var want []string
			for _, cpus := range q.workerCPUs(a, topo, g) {
				want = append(want, topology.NewCPUSet(cpus...).String())
			}
			slices.Sort(want)
			if got := installedCPUs(q); !slices.Equal(got, want) {
				t.Errorf("topology %d, %s, attrs %+v, global %v: pools %v, probed %v", ti, q.name, a, g, got, want)
			}
		}
		check(pq, pq.attrs, nil)
		masks := []topology.CPUSet{{}, topology.NewCPUSet(1), topology.NewCPUSet(0, 1), topology.NewCPUSet(0, 2, 3), topology.NewCPUSet(7)}
		globals := []*topology.CPUSet{nil, ptr(topology.NewCPUSet(1, 2)), ptr(topology.NewCPUSet(9))}
		for _, q := range []*Workqueue{uq, oq} {
			base := q.attrs
			for scope := ScopeCPU; scope <= ScopeSystem; scope++ {
				for _, strict := range []bool{false, true} {
					for _, m := range masks {
						for _, g := range globals {
							a := base
							a.scope, a.scopeDefault, a.strict, a.cpus = scope, false, strict, m
							check(q, a, g)
						}
					}
				}
			}
			a := base
			a.scopeDefault, a.strict = true, true
			check(q, a, nil)
		}
		unboundMask.Store(nil)
		for _, q := range []*Workqueue{pq, uq, oq} {
			q.Destroy()
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestQueueAttrsEqual: equal tells apart every field a pool key depends on.
func TestQueueAttrsEqual(t *testing.T) {
	base := queueAttrs{policy: PolicyNormal, scope: ScopeCache, scopeDefault: true}
	if !base.equal(base) {
		t.Fatal("attrs not equal to themselves")
	}
	for i, change := range []func(a *queueAttrs){
		func(a *queueAttrs) { a.class.nice = 5 },
		func(a *queueAttrs) { a.class.prio = 1 },
		func(a *queueAttrs) { a.policy = PolicyHighPri },
		func(a *queueAttrs) { a.cpus = topology.NewCPUSet(0) },
		func(a *queueAttrs) { a.scope = ScopeCPU },
		func(a *queueAttrs) { a.strict = true },
		func(a *queueAttrs) { a.scopeDefault = false },
	} {
		a := base
		change(&a)
		if a.equal(base) {
			t.Errorf("change %d: still equal: %s", i, fmt.Sprint(a))
		}
	}
}
