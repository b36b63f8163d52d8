package topology

import (
	"errors"
	"slices"
	"testing"
)

// podStrings renders pods in list format for compact comparisons.
func podStrings(pods []CPUSet) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.String()
	}
	return out
}

func mustList(t testing.TB, s string) CPUSet {
	t.Helper()
	set, err := ParseList(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// checkPartition verifies the invariants every scope must keep: pods are
// non-empty, disjoint, cover Online, are sorted by first CPU, and agree with
// PodOf, Pod and (for numa) NodeOf and Nodes.
func checkPartition(t testing.TB, topo *Topology) {
	t.Helper()
	for sc := ScopeDefault; sc <= ScopeSystem; sc++ {
		pods := topo.Pods(sc)
		var union CPUSet
		for i, p := range pods {
			if p.IsEmpty() {
				t.Fatalf("%v: pod %d empty", sc, i)
			}
			if i > 0 && pods[i-1].First() >= p.First() {
				t.Fatalf("%v: pods not sorted by first CPU: %v", sc, podStrings(pods))
			}
			if !union.And(p).IsEmpty() {
				t.Fatalf("%v: pods overlap: %v", sc, podStrings(pods))
			}
			union = union.Or(p)
			for c := range p.All() {
				if topo.PodOf(sc, c) != i || !topo.Pod(sc, c).Equal(p) {
					t.Fatalf("%v: PodOf(%d) = %d, want %d", sc, c, topo.PodOf(sc, c), i)
				}
			}
		}
		if !union.Equal(topo.Online) {
			t.Fatalf("%v: pods %v do not cover online %v", sc, podStrings(pods), topo.Online)
		}
	}
	nodes := topo.Nodes()
	if got, want := len(nodes), len(topo.Pods(ScopeNUMA)); got != want {
		t.Fatalf("%d nodes but %d numa pods", got, want)
	}
	for i, n := range nodes {
		if i > 0 && nodes[i-1].ID >= n.ID {
			t.Fatalf("nodes not sorted: %v", nodes)
		}
		for c := range n.CPUs.All() {
			if topo.NodeOf(c) != n.ID {
				t.Fatalf("NodeOf(%d) = %d, want %d", c, topo.NodeOf(c), n.ID)
			}
		}
	}
}

// static16 is 16 CPUs: SMT pairs, 4 CPUs per LLC, 8 per node, with
// CPUs 3 and 9-11 unusable.
func static16(t testing.TB) *Topology {
	online := mustList(t, "0-2,4-8,12-15")
	return NewStatic(online,
		func(c int) int { return c / 2 },
		func(c int) int { return 100 + c/4 },
		func(c int) int { return c / 8 })
}

func TestNewStaticPods(t *testing.T) {
	topo := static16(t)
	checkPartition(t, topo)
	want := map[Scope][]string{
		ScopeCPU:     {"0", "1", "2", "4", "5", "6", "7", "8", "12", "13", "14", "15"},
		ScopeSMT:     {"0-1", "2", "4-5", "6-7", "8", "12-13", "14-15"},
		ScopeCache:   {"0-2", "4-7", "8", "12-15"},
		ScopeDefault: {"0-2", "4-7", "8", "12-15"},
		ScopeNUMA:    {"0-2,4-7", "8,12-15"},
		ScopeSystem:  {"0-2,4-8,12-15"},
	}
	for sc, w := range want {
		if got := podStrings(topo.Pods(sc)); !slices.Equal(got, w) {
			t.Errorf("Pods(%v) = %v, want %v", sc, got, w)
		}
	}
	if got := topo.PodOf(ScopeCache, 13); got != 3 {
		t.Errorf("PodOf(cache, 13) = %d, want 3", got)
	}
	for _, c := range []int{-1, 3, 9, 16, 1 << 20} {
		if topo.PodOf(ScopeSMT, c) != -1 || !topo.Pod(ScopeSMT, c).IsEmpty() || topo.NodeOf(c) != -1 {
			t.Errorf("CPU %d is not online but has a pod or node", c)
		}
	}
	if topo.Pods(Scope(42)) != nil || topo.PodOf(Scope(-1), 0) != -1 {
		t.Error("invalid scope gives pods")
	}
	nodes := topo.Nodes()
	if len(nodes) != 2 || nodes[0].ID != 0 || nodes[0].CPUs.String() != "0-2,4-7" ||
		nodes[1].ID != 1 || nodes[1].CPUs.String() != "8,12-15" {
		t.Errorf("Nodes() = %v", nodes)
	}
	// The returned slices are copies.
	p := topo.Pods(ScopeSMT)
	p[0] = CPUSet{}
	nodes[0].ID = 7
	if topo.Pods(ScopeSMT)[0].IsEmpty() || topo.Nodes()[0].ID != 0 {
		t.Error("Pods or Nodes exposes internal state")
	}
}

func TestNewStaticDefaults(t *testing.T) {
	topo := NewStatic(mustList(t, "0-3"), nil, nil, nil)
	checkPartition(t, topo)
	if got := podStrings(topo.Pods(ScopeSMT)); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
		t.Errorf("default cores: %v", got)
	}
	if got := podStrings(topo.Pods(ScopeCache)); !slices.Equal(got, []string{"0-3"}) {
		t.Errorf("default cache: %v", got)
	}
	// A nil llcOf follows the nodes.
	topo = NewStatic(mustList(t, "0-3"), nil, nil, func(c int) int { return c % 2 })
	if got := podStrings(topo.Pods(ScopeCache)); !slices.Equal(got, []string{"0,2", "1,3"}) {
		t.Errorf("cache from nodes: %v", got)
	}
	if !topo.Possible.Equal(topo.Online) {
		t.Errorf("Possible %v != Online %v", topo.Possible, topo.Online)
	}
	empty := NewStatic(CPUSet{}, nil, nil, nil)
	if len(empty.Pods(ScopeSystem)) != 0 || len(empty.Nodes()) != 0 {
		t.Error("empty topology has pods")
	}
}

func TestTopologyEqual(t *testing.T) {
	a, b := static16(t), static16(t)
	if !a.Equal(b) || !b.Equal(a) {
		t.Fatal("identical topologies differ")
	}
	var nilT *Topology
	if a.Equal(nil) || nilT.Equal(a) || !nilT.Equal(nil) {
		t.Fatal("nil handling wrong")
	}
	// Different labels, same partition: equal.
	relabeled := NewStatic(a.Online,
		func(c int) int { return -c / 2 },
		func(c int) int { return c / 4 },
		func(c int) int { return c / 8 })
	if !a.Equal(relabeled) {
		t.Fatal("relabelled cores or caches compare unequal")
	}
	for name, o := range map[string]*Topology{
		"online": NewStatic(mustList(t, "0-2,4-8,12-14"), func(c int) int { return c / 2 },
			func(c int) int { return c / 4 }, func(c int) int { return c / 8 }),
		"smt": NewStatic(a.Online, nil, func(c int) int { return c / 4 }, func(c int) int { return c / 8 }),
		"cache": NewStatic(a.Online, func(c int) int { return c / 2 }, func(c int) int { return c / 8 },
			func(c int) int { return c / 8 }),
		"node ids": NewStatic(a.Online, func(c int) int { return c / 2 }, func(c int) int { return c / 4 },
			func(c int) int { return 5 + c/8 }),
	} {
		if a.Equal(o) {
			t.Errorf("change of %s not detected: %v vs %v", name, a, o)
		}
	}
	p := static16(t)
	p.Possible = mustList(t, "0-31")
	if a.Equal(p) {
		t.Error("change of Possible not detected")
	}
	want := "online=0-2,4-8,12-15 possible=0-2,4-8,12-15 smt=[0-1 2 4-5 6-7 8 12-13 14-15] " +
		"cache=[0-2 4-7 8 12-15] numa=[0:0-2,4-7 1:8,12-15]"
	if got := a.String(); got != want {
		t.Errorf("String() =\n %s\nwant\n %s", got, want)
	}
}

func TestScopeNames(t *testing.T) {
	for sc := ScopeDefault; sc <= ScopeSystem; sc++ {
		got, err := ParseScope(sc.String())
		if err != nil || got != sc {
			t.Errorf("ParseScope(%q) = %v, %v", sc.String(), got, err)
		}
	}
	want := []string{"default", "cpu", "smt", "cache_shard", "cache", "numa", "system"}
	for i, w := range want {
		if Scope(i).String() != w {
			t.Errorf("Scope(%d) = %q, want %q", i, Scope(i), w)
		}
	}
	if got, err := ParseScope(" Cache\n"); err != nil || got != ScopeCache {
		t.Errorf("ParseScope(\" Cache\\n\") = %v, %v", got, err)
	}
	if DefaultScope != ScopeCacheShard {
		t.Errorf("DefaultScope = %v, want cache_shard (the kernel's)", DefaultScope)
	}
	for _, bad := range []string{"", "core", "cache-shard", "node"} {
		if _, err := ParseScope(bad); !errors.Is(err, ErrUnknownScope) || !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseScope(%q) err = %v", bad, err)
		}
	}
	if Scope(9).Valid() || Scope(9).String() != "Scope(9)" {
		t.Error("invalid scope reported valid")
	}
}
