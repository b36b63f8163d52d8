package wq_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/topology"
)

// injectTopology makes t the topology gowq reads until the test ends, and
// restores the cache_shard_size global.
func injectTopology(t *testing.T, topo *topology.Topology) {
	t.Helper()
	if err := wq.SetTopologySource(&topology.StaticSource{T: topo}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = wq.SetCacheShardSize(wq.DefaultCacheShardSize)
		_ = wq.SetTopologySource(nil)
	})
}

func cpuRange(lo, hi int) topology.CPUSet {
	var cpus []int
	for c := lo; c <= hi; c++ {
		cpus = append(cpus, c)
	}
	return topology.NewCPUSet(cpus...)
}

// poolGroups returns, for an unbound queue, the sets of CPUs served by one
// pool each, in order of their first CPU, in list format.
func poolGroups(t *testing.T, q *wq.Workqueue, online topology.CPUSet) []string {
	t.Helper()
	ids := q.PoolIDs()
	byPool := map[int][]int{}
	var order []int
	for c := range online.All() {
		if c >= len(ids) {
			t.Fatalf("PoolIDs has %d entries, online %v", len(ids), online)
		}
		if _, ok := byPool[ids[c]]; !ok {
			order = append(order, ids[c])
		}
		byPool[ids[c]] = append(byPool[ids[c]], c)
	}
	var out []string
	for _, id := range order {
		out = append(out, topology.NewCPUSet(byPool[id]...).String())
	}
	return out
}

// TestDefaultScopeIsCacheShard: gowq's default affinity scope is the
// kernel's new default, cache_shard. Fault caught: unbound queues on a
// machine with many CPUs per LLC collapsing into one pool (cache).
func TestDefaultScopeIsCacheShard(t *testing.T) {
	if got, err := wq.GlobalAttr("default_affinity_scope"); err != nil || got != "cache_shard" {
		t.Fatalf("default_affinity_scope = %q, %v; want cache_shard", got, err)
	}
	if got, err := wq.GlobalAttr("cache_shard_size"); err != nil || got != strconv.Itoa(wq.DefaultCacheShardSize) {
		t.Fatalf("cache_shard_size = %q, %v; want %d", got, err, wq.DefaultCacheShardSize)
	}
	if !slices.Contains(wq.GlobalAttrNames(), "cache_shard_size") {
		t.Fatalf("GlobalAttrNames %v lacks cache_shard_size", wq.GlobalAttrNames())
	}
}

// TestCacheShardOneLLC72: on 72 CPUs sharing one LLC, a default unbound
// thread-backed (goroutine-backed queues use one pool whatever the scope)
// queue gets 9 pools of 8 CPUs, and cache_shard_size 4 makes 18; the
// cache scope keeps one. Fault caught: the default scope's pods not cut
// from the LLC, or a size change that does not rebuild the pools.
func TestCacheShardOneLLC72(t *testing.T) {
	online := cpuRange(0, 71)
	injectTopology(t, topology.NewStatic(online, nil, func(int) int { return 0 }, nil))
	q := mustAlloc(t, "shard72", wq.Unbound, 0, wq.Threads())
	var want []string
	for lo := 0; lo < 72; lo += 8 {
		want = append(want, cpuRange(lo, lo+7).String())
	}
	if got := wq.AffinityPods()["cache_shard"]; !slices.Equal(got, want) {
		t.Fatalf("cache_shard pods %v, want %v", got, want)
	}
	if got := poolGroups(t, q, online); !slices.Equal(got, want) {
		t.Fatalf("default queue's pools serve %v, want %v", got, want)
	}
	if err := wq.SetCacheShardSize(4); err != nil {
		t.Fatal(err)
	}
	if got := poolGroups(t, q, online); len(got) != 18 || got[0] != "0-3" {
		t.Fatalf("at cache_shard_size 4 the pools serve %v, want 18 of 4 CPUs", got)
	}
	if err := wq.SetGlobalAttr("cache_shard_size", "8"); err != nil {
		t.Fatal(err)
	}
	if got := poolGroups(t, q, online); !slices.Equal(got, want) {
		t.Fatalf("back at 8 the pools serve %v, want %v", got, want)
	}
	c := mustAlloc(t, "cache72", wq.Unbound, 0, wq.Threads())
	if err := c.SetAffinityScope(wq.ScopeCache); err != nil {
		t.Fatal(err)
	}
	if got := poolGroups(t, c, online); !slices.Equal(got, []string{"0-71"}) {
		t.Fatalf("cache-scope queue's pools serve %v, want one", got)
	}
}

// TestCacheShardTwoSocketsSMT: 2 sockets of 44 cores with SMT (siblings n
// and n+88) give 6 pools per socket, each holding both siblings of its
// cores. Fault caught: a shard cut by CPU count, splitting siblings.
func TestCacheShardTwoSocketsSMT(t *testing.T) {
	online := cpuRange(0, 175)
	socket := func(c int) int { return c % 88 / 44 }
	injectTopology(t, topology.NewStatic(online, func(c int) int { return c % 88 }, socket, socket))
	q := mustAlloc(t, "shard2x44", wq.Unbound, 0, wq.Threads())
	groups := poolGroups(t, q, online)
	if len(groups) != 12 {
		t.Fatalf("pools serve %v, want 12 groups", groups)
	}
	ids := q.PoolIDs()
	for c := 0; c < 88; c++ {
		if ids[c] != ids[c+88] {
			t.Fatalf("CPU %d and its sibling %d are served by pools %d and %d", c, c+88, ids[c], ids[c+88])
		}
		if c > 0 && socket(c) != socket(c-1) && ids[c] == ids[c-1] {
			t.Fatalf("CPUs %d and %d of two sockets share pool %d", c-1, c, ids[c])
		}
	}
}
