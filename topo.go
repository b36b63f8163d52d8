package wq

import (
	"sync"
	"sync/atomic"

	"github.com/gowq/wq/internal/topology"
)

var topo struct {
	once sync.Once
	src  topology.Source
	cur  atomic.Pointer[topology.Topology]
}

// currentTopology returns the topology snapshot in force (lock-free after
// the first call).
func currentTopology() *topology.Topology {
	topo.once.Do(func() {
		topo.src = &topology.SysfsSource{}
		t, err := topo.src.Read()
		if err != nil {
			panic("wq: cannot read CPU topology: " + err.Error())
		}
		topo.cur.Store(t)
	})
	return topo.cur.Load()
}

// nodeCPUs returns the online CPUs of NUMA node node (empty if unknown).
func nodeCPUs(t *topology.Topology, node int) topology.CPUSet {
	for _, n := range t.Nodes() {
		if n.ID == node {
			return n.CPUs
		}
	}
	return topology.CPUSet{}
}
