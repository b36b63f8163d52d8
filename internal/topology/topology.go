package topology

import (
	"fmt"
	"slices"
	"strings"
)

// Node is one NUMA node and the CPUs of Topology.Online that belong to it.
type Node struct {
	ID   int    // the kernel's node id (nodeN in sysfs)
	CPUs CPUSet // never empty in a Topology
}

// Topology is an immutable snapshot of the CPUs this process may use and
// how they share cores, caches and NUMA nodes. It is built by a Source (or
// NewStatic) and must not be modified afterwards; a *Topology is safe to
// read from any goroutine. Every method is non-blocking and restricted to
// Online: CPUs outside it belong to no pod and no node.
type Topology struct {
	// Online is the set of CPUs the process may run on: the kernel's online
	// CPUs ∩ the process affinity ∩ the cgroup cpuset (see SysfsSource).
	// Never empty in a Topology returned by a Source.
	Online CPUSet
	// Possible is the kernel's cpu_possible_mask: every CPU id that can ever
	// come online on this boot. Online ⊆ Possible for SysfsSource.
	Possible CPUSet

	node   []int32             // NUMA node per CPU id, -1 where not Online
	pods   [numScopes][]CPUSet // per resolved scope, sorted by First
	podIdx [numScopes][]int32  // per scope: CPU id -> index in pods, -1 where not Online
	nodes  []Node              // sorted by ID
	// shardSize is the cache shard size (cores) of the ScopeCacheShard
	// pods (WithCacheShardSize).
	shardSize int
}

// NewStatic builds a Topology from explicit data, for tests and for callers
// that inject a topology (for example to simulate CPU hotplug). Online and
// Possible are both set to online. For each CPU of online, coreOf returns its
// SMT core, llcOf its last-level cache and nodeOf its NUMA node; the values
// are arbitrary labels, and CPUs with equal labels form one pod; the
// cache_shard pods are cut from them with DefaultCacheShardSize. A nil
// coreOf puts each CPU in its own core, a nil nodeOf puts all CPUs in node 0,
// and a nil llcOf gives one cache group per NUMA node. The functions are
// called during NewStatic only and not retained.
func NewStatic(online CPUSet, coreOf, llcOf, nodeOf func(cpu int) int) *Topology {
	if coreOf == nil {
		coreOf = func(cpu int) int { return cpu }
	}
	if nodeOf == nil {
		nodeOf = func(int) int { return 0 }
	}
	if llcOf == nil {
		llcOf = nodeOf
	}
	return newTopology(online, online, coreOf, llcOf, nodeOf)
}

// newTopology computes the pods of every scope over online.
func newTopology(online, possible CPUSet, coreOf, llcOf, nodeOf func(int) int) *Topology {
	t := &Topology{Online: online, Possible: possible}
	n := online.Last() + 1
	t.node = make([]int32, n)
	for i := range t.node {
		t.node[i] = -1
	}
	keys := [numScopes]func(int) int{
		ScopeCPU:    func(c int) int { return c },
		ScopeSMT:    coreOf,
		ScopeCache:  llcOf,
		ScopeNUMA:   nodeOf,
		ScopeSystem: func(int) int { return 0 },
	}
	for sc := ScopeCPU; sc <= ScopeSystem; sc++ {
		if sc == ScopeCacheShard {
			continue // cut from the SMT and cache pods below
		}
		t.pods[sc], t.podIdx[sc] = groupPods(online, n, keys[sc])
	}
	byNode := map[int][]int{}
	for c := range online.All() {
		id := nodeOf(c)
		t.node[c] = int32(id)
		byNode[id] = append(byNode[id], c)
	}
	for id, cpus := range byNode {
		t.nodes = append(t.nodes, Node{ID: id, CPUs: NewCPUSet(cpus...)})
	}
	slices.SortFunc(t.nodes, func(a, b Node) int { return a.ID - b.ID })
	t.shardSize = DefaultCacheShardSize
	t.computeShards()
	return t
}

// Pods returns the affinity pods of scope: a partition of Online into
// non-empty sets, sorted by their first CPU (the kernel's wq_pod_type).
// ScopeDefault means DefaultScope; an invalid scope returns nil. The slice
// is a new copy the caller may keep or modify.
func (t *Topology) Pods(scope Scope) []CPUSet {
	if !scope.Valid() {
		return nil
	}
	return slices.Clone(t.pods[scope.resolve()])
}

// PodOf returns the index in Pods(scope) of the pod that holds cpu, or -1
// when cpu is not in Online or scope is invalid. It does not allocate.
func (t *Topology) PodOf(scope Scope, cpu int) int {
	if !scope.Valid() {
		return -1
	}
	idx := t.podIdx[scope.resolve()]
	if cpu < 0 || cpu >= len(idx) {
		return -1
	}
	return int(idx[cpu])
}

// Pod returns the pod of scope that holds cpu, or the empty set when cpu is
// not in Online or scope is invalid. It does not allocate.
func (t *Topology) Pod(scope Scope, cpu int) CPUSet {
	i := t.PodOf(scope, cpu)
	if i < 0 {
		return CPUSet{}
	}
	return t.pods[scope.resolve()][i]
}

// NodeOf returns the NUMA node of cpu (the kernel's cpu_to_node), or -1 when
// cpu is not in Online.
func (t *Topology) NodeOf(cpu int) int {
	if cpu < 0 || cpu >= len(t.node) {
		return -1
	}
	return int(t.node[cpu])
}

// Nodes returns the NUMA nodes that have at least one CPU in Online, sorted
// by ID, each with its CPUs in Online. Memory-only nodes and nodes whose
// CPUs are all offline or outside the affinity are left out. The slice is a
// new copy.
func (t *Topology) Nodes() []Node {
	return slices.Clone(t.nodes)
}

// Equal reports whether t and o describe the same usable topology: the same
// Online and Possible sets, the same SMT, cache shard, cache and NUMA pods,
// and the same node ids. Two nil topologies are equal; nil never equals a non-nil one.
func (t *Topology) Equal(o *Topology) bool {
	if t == nil || o == nil {
		return t == o
	}
	if !t.Online.Equal(o.Online) || !t.Possible.Equal(o.Possible) {
		return false
	}
	for _, sc := range []Scope{ScopeSMT, ScopeCacheShard, ScopeCache, ScopeNUMA} {
		if !slices.EqualFunc(t.pods[sc], o.pods[sc], CPUSet.Equal) {
			return false
		}
	}
	return slices.EqualFunc(t.nodes, o.nodes, func(a, b Node) bool {
		return a.ID == b.ID && a.CPUs.Equal(b.CPUs)
	})
}

// String summarises the topology for logs and test failures, e.g.
// "online=0-6 possible=0-7 smt=[0-1 2-3 4-5 6] cache=[0-3 4-6] numa=[0:0-3 1:4-6]".
func (t *Topology) String() string {
	if t == nil {
		return "<nil>"
	}
	pods := func(sc Scope) string {
		s := make([]string, len(t.pods[sc]))
		for i, p := range t.pods[sc] {
			s[i] = p.String()
		}
		return strings.Join(s, " ")
	}
	nodes := make([]string, len(t.nodes))
	for i, n := range t.nodes {
		nodes[i] = fmt.Sprintf("%d:%s", n.ID, n.CPUs)
	}
	return fmt.Sprintf("online=%s possible=%s smt=[%s] cache=[%s] numa=[%s]",
		t.Online, t.Possible, pods(ScopeSMT), pods(ScopeCache), strings.Join(nodes, " "))
}

// groupPods groups the online CPUs into pods by key: CPUs with equal keys
// share a pod. Walking online in increasing order creates the pods in the
// order of their first CPU, which is the documented sort order. It
// returns the pods and, for each of the n CPU ids, its pod's index (-1
// for a CPU not online).
func groupPods[K comparable](online CPUSet, n int, key func(int) K) ([]CPUSet, []int32) {
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = -1
	}
	byKey := map[K]int{}
	var members [][]int
	for c := range online.All() {
		k := key(c)
		p, ok := byKey[k]
		if !ok {
			p = len(members)
			byKey[k] = p
			members = append(members, nil)
		}
		members[p] = append(members[p], c)
		idx[c] = int32(p)
	}
	pods := make([]CPUSet, len(members))
	for i, m := range members {
		pods[i] = NewCPUSet(m...)
	}
	return pods, idx
}
