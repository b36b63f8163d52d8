package wq

import (
	"slices"
	"testing"

	"github.com/gowq/wq/internal/topology"
)

// escapeTarget prefers the SMT siblings, then the cache pod, then the
// node, then any CPU, and never returns the stalled CPU.
func TestEscapeTargetPreference(t *testing.T) {
	core := func(c int) int { return c / 2 }
	llc4 := func(c int) int { return c / 4 }
	node4 := func(c int) int { return c / 4 }
	set := topology.NewCPUSet
	without := func(s topology.CPUSet, cpus ...int) topology.CPUSet { return s.AndNot(set(cpus...)) }
	all := set(0, 1, 2, 3, 4, 5, 6, 7)
	for _, c := range []struct {
		name   string
		topo   *topology.Topology
		cpu    int
		expect []int
	}{
		{"smt sibling", topology.NewStatic(all, core, llc4, node4), 0, []int{1}},
		{"cache pod when the sibling is offline", topology.NewStatic(without(all, 1), core, llc4, node4), 0, []int{2, 3}},
		{"node when the cache pod is the core", topology.NewStatic(without(all, 1), core, core, node4), 0, []int{2, 3}},
		{"anywhere when the node has no other CPU", topology.NewStatic(set(0, 4, 5, 6, 7), core, llc4, node4), 0, []int{4, 5, 6, 7}},
		{"offline stalled CPU: every online CPU", topology.NewStatic(set(4, 5), core, llc4, node4), 0, []int{4, 5}},
		{"one CPU: nowhere", topology.NewStatic(set(3), core, llc4, node4), 3, nil},
	} {
		got := escapeTarget(c.topo, c.cpu).List()
		if !slices.Equal(got, c.expect) {
			t.Errorf("%s: escapeTarget(%d) = %v, want %v", c.name, c.cpu, got, c.expect)
		}
		if slices.Contains(got, c.cpu) {
			t.Errorf("%s: target %v holds the stalled CPU %d", c.name, got, c.cpu)
		}
	}
}
