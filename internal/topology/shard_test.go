package topology

import (
	"errors"
	"slices"
	"testing"
)

// shardSizes returns the number of CPUs of each cache_shard pod.
func shardSizes(t *Topology) []int {
	var out []int
	for _, p := range t.Pods(ScopeCacheShard) {
		out = append(out, p.Len())
	}
	return out
}

// TestCacheShardOneLLC72: 72 CPUs without SMT on one LLC (NVIDIA Grace)
// make 9 shards of 8 CPUs, in CPU order, at the default size. Fault
// caught: cache_shard pods equal to the whole LLC (the cache scope's one
// contended pool).
func TestCacheShardOneLLC72(t *testing.T) {
	topo := NewStatic(cpuRange(0, 71), nil, func(int) int { return 0 }, nil)
	want := []string{"0-7", "8-15", "16-23", "24-31", "32-39", "40-47", "48-55", "56-63", "64-71"}
	if got := podStrings(topo.Pods(ScopeCacheShard)); !slices.Equal(got, want) {
		t.Fatalf("cache_shard pods = %v, want %v", got, want)
	}
	if got := podStrings(topo.Pods(ScopeCache)); !slices.Equal(got, []string{"0-71"}) {
		t.Fatalf("cache pods = %v, want one LLC", got)
	}
	if got := podStrings(topo.Pods(ScopeDefault)); !slices.Equal(got, want) {
		t.Fatalf("default-scope pods = %v, want the cache_shard pods %v", got, want)
	}
	if topo.PodOf(ScopeCacheShard, 17) != 2 || !topo.Pod(ScopeCacheShard, 70).Equal(cpuRange(64, 71)) {
		t.Fatalf("PodOf(cache_shard, 17) = %d, Pod(cache_shard, 70) = %v", topo.PodOf(ScopeCacheShard, 17), topo.Pod(ScopeCacheShard, 70))
	}
}

// TestCacheShardTwoSocketsSMT: 2 sockets of 44 cores with SMT (176 CPUs,
// siblings n and n+88, one LLC and node per socket) make 6 shards per
// socket of 8+8+7+7+7+7 cores, each with both siblings of every core.
// Fault caught: shards cut by CPU count (a sibling in another shard) or
// across sockets.
func TestCacheShardTwoSocketsSMT(t *testing.T) {
	core := func(c int) int { return c % 88 }
	socket := func(c int) int { return c % 88 / 44 }
	topo := NewStatic(cpuRange(0, 175), core, socket, socket)
	pods := topo.Pods(ScopeCacheShard)
	if got, want := shardSizes(topo), []int{16, 16, 14, 14, 14, 14, 16, 16, 14, 14, 14, 14}; !slices.Equal(got, want) {
		t.Fatalf("cache_shard pod sizes = %v, want %v (pods %v)", got, want, podStrings(pods))
	}
	if got := podStrings(pods)[:2]; !slices.Equal(got, []string{"0-7,88-95", "8-15,96-103"}) {
		t.Fatalf("first shards = %v", got)
	}
	for _, p := range pods {
		for c := range p.All() {
			if sib := (c + 88) % 176; !p.Has(sib) {
				t.Fatalf("pod %v holds cpu %d without its sibling %d", p, c, sib)
			}
			if socket(c) != socket(p.First()) {
				t.Fatalf("pod %v spans sockets", p)
			}
		}
	}
}

// TestCacheShardSizes: the kernel's layout (round(cores/size) shards, at
// least one, the first cores%shards one core larger) for sizes and LLCs
// where rounding matters, and WithCacheShardSize's bounds. Fault caught:
// ceil instead of round (12 cores at 8 would give 2 shards, correct; 11
// would give 2 of 6+5 where the kernel keeps one of 11), or a size that
// does not recompute the pods.
func TestCacheShardSizes(t *testing.T) {
	for _, tc := range []struct {
		cores, size int
		want        []int
	}{
		{2, 8, []int{2}},
		{11, 8, []int{11}},
		{12, 8, []int{6, 6}},
		{36, 8, []int{8, 7, 7, 7, 7}},
		{72, 8, []int{8, 8, 8, 8, 8, 8, 8, 8, 8}},
		{8, 1, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{8, 3, []int{3, 3, 2}},
	} {
		base := NewStatic(cpuRange(0, tc.cores-1), nil, func(int) int { return 0 }, nil)
		topo, err := base.WithCacheShardSize(tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if got := shardSizes(topo); !slices.Equal(got, tc.want) {
			t.Errorf("%d cores at size %d: shards %v, want %v", tc.cores, tc.size, got, tc.want)
		}
		if topo.CacheShardSize() != tc.size {
			t.Errorf("CacheShardSize() = %d, want %d", topo.CacheShardSize(), tc.size)
		}
		if tc.size != DefaultCacheShardSize && tc.cores > tc.size && topo.Equal(base) {
			t.Errorf("%d cores: size %d topology equals the default one", tc.cores, tc.size)
		}
	}
	base := NewStatic(cpuRange(0, 3), nil, nil, nil)
	if same, err := base.WithCacheShardSize(DefaultCacheShardSize); err != nil || same != base {
		t.Errorf("WithCacheShardSize(default) = %p, %v; want the same topology", same, err)
	}
	for _, bad := range []int{0, -1, MaxCacheShardSize + 1} {
		if got, err := base.WithCacheShardSize(bad); got != nil || !errors.Is(err, ErrCacheShardSize) {
			t.Errorf("WithCacheShardSize(%d) = %v, %v; want ErrCacheShardSize", bad, got, err)
		}
	}
	if base.CacheShardSize() != DefaultCacheShardSize {
		t.Errorf("base size changed to %d", base.CacheShardSize())
	}
}

// cpuRange returns the set lo..hi.
func cpuRange(lo, hi int) CPUSet {
	var cpus []int
	for c := lo; c <= hi; c++ {
		cpus = append(cpus, c)
	}
	return NewCPUSet(cpus...)
}
