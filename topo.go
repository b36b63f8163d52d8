package wq

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// CPU hotplug.
//
// gowq sees a CPU come or go when it goes offline in sysfs, when the
// process's cgroup cpuset changes, or when the process's affinity (that of
// its main thread) is narrowed from outside, for example with taskset -p.
// A watcher rescans every HotplugInterval (1 s) while any pool exists, so a
// change is noticed within about 1 s; Rescan notices it at once.
//
// When a CPU leaves, its per-CPU pools are disassociated: their workers may
// then run on every remaining CPU, so their pending items still run and
// nothing is stranded; unbound pods are recomputed for new items. When the
// CPU returns, the pools are bound to it again. Subscribers registered with
// OnCPUChange (the kthread per-CPU sets) are told after that.

// HotplugInterval is how often the topology watcher rescans.
const HotplugInterval = time.Second

// switchSource is the watcher's source; tests switch what it reads.
type switchSource struct {
	mu  sync.Mutex
	src topology.Source
}

func (s *switchSource) Read() (*topology.Topology, error) {
	s.mu.Lock()
	src := s.src
	s.mu.Unlock()
	t, err := src.Read()
	return withShardSize(t), err
}

func (s *switchSource) set(src topology.Source) {
	s.mu.Lock()
	s.src = src
	s.mu.Unlock()
}

var source = &switchSource{src: &topology.SysfsSource{}}

var topo struct {
	once sync.Once
	w    atomic.Pointer[topology.Watcher]
	// life serialises starting and stopping the watcher. It is never held
	// by the watcher's own goroutine, so stopping may wait for it.
	life    sync.Mutex
	running bool       // guarded by life
	mu      sync.Mutex // guards the fields below
	subs    map[int]func(online []int)
	nextSub int
}

func initTopology() {
	topo.once.Do(func() {
		w := topology.NewWatcher(source, HotplugInterval, onTopologyChange)
		if _, _, err := w.Rescan(); err != nil {
			panic("wq: cannot read CPU topology: " + err.Error())
		}
		topo.w.Store(w)
	})
}

// currentTopology returns the topology snapshot in force (two atomic loads
// after the first call).
func currentTopology() *topology.Topology {
	initTopology()
	return topo.w.Load().Current()
}

// startHotplugWatch starts the periodic rescan; called, without the pool
// registry's lock, after the first pool is created.
func startHotplugWatch() {
	initTopology()
	topo.life.Lock()
	defer topo.life.Unlock()
	if topo.running {
		return
	}
	w := topo.w.Load()
	if w.Stopped() {
		// A watcher cannot be restarted after Stop: make a fresh one that
		// starts from the current snapshot.
		nw := topology.NewWatcher(source, HotplugInterval, onTopologyChange)
		if _, _, err := nw.Rescan(); err != nil {
			nw = topology.NewWatcher(&topology.StaticSource{T: w.Current()}, HotplugInterval, onTopologyChange)
			_, _, _ = nw.Rescan()
		}
		topo.w.Store(nw)
		w = nw
	}
	w.Start()
	topo.running = true
}

// stopHotplugWatch stops it when the last pool is gone, so that an idle
// process keeps no goroutine of gowq's. A pool created meanwhile keeps it.
func stopHotplugWatch() {
	topo.life.Lock()
	defer topo.life.Unlock()
	if !topo.running || poolCount() > 0 {
		return
	}
	topo.w.Load().Stop()
	topo.running = false
}

func poolCount() int {
	poolRegistry.mu.Lock()
	defer poolRegistry.mu.Unlock()
	return len(poolRegistry.m)
}

// Rescan reads the CPU topology now and applies any change (see the
// hotplug notes above) before returning. It returns an error if the
// topology cannot be read; the old one then stays in force.
func Rescan() error {
	initTopology()
	_, _, err := topo.w.Load().Rescan()
	if err != nil {
		return fmt.Errorf("wq: rescan topology: %w", err)
	}
	return nil
}

// setTopologySource replaces where the topology is read from, for tests
// that simulate hotplug; nil restores sysfs. The new source is read at
// once, as by Rescan.
func setTopologySource(src topology.Source) error {
	initTopology()
	if src == nil {
		src = &topology.SysfsSource{}
	}
	source.set(src)
	return Rescan()
}

// OnlineCPUs returns the CPUs gowq's pools may use now, in order.
func OnlineCPUs() []int { return currentTopology().Online.List() }

// OnCPUChange registers fn to be called, on the watcher's goroutine, with
// the new online CPUs after every topology change has been applied to the
// pools. It returns a function that unregisters fn. fn must not block for
// long and must not call Rescan.
func OnCPUChange(fn func(online []int)) (cancel func()) {
	topo.mu.Lock()
	defer topo.mu.Unlock()
	if topo.subs == nil {
		topo.subs = map[int]func([]int){}
	}
	id := topo.nextSub
	topo.nextSub++
	topo.subs[id] = fn
	return func() {
		topo.mu.Lock()
		delete(topo.subs, id)
		topo.mu.Unlock()
	}
}

// onTopologyChange applies a new topology: pools first, then queues'
// tables, then subscribers.
func onTopologyChange(old, nt *topology.Topology) {
	if old == nil {
		return
	}
	online := nt.Online
	// Per-CPU pools: disassociate the ones whose CPU left, rebind the ones
	// whose CPU came back.
	poolRegistry.mu.Lock()
	var pools []*pool
	for _, p := range poolRegistry.m {
		pools = append(pools, p)
	}
	poolRegistry.mu.Unlock()
	for _, p := range pools {
		p.applyTopology(online)
	}
	for _, q := range liveQueues() {
		if q.unbound {
			q.reinstall(nt)
		}
	}
	topo.mu.Lock()
	subs := make([]func([]int), 0, len(topo.subs))
	for _, f := range topo.subs {
		subs = append(subs, f)
	}
	topo.mu.Unlock()
	list := online.List()
	for _, f := range subs {
		f(list)
	}
}

// applyTopology updates the CPUs a pool's workers may use after a hotplug
// event and moves its live workers there (sched_setaffinity on their tids,
// the kernel's unbind_workers / rebind_workers).
func (p *pool) applyTopology(online topology.CPUSet) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var cpus []int
	if p.key.cpu >= 0 {
		if online.Has(p.key.cpu) {
			cpus = []int{p.key.cpu}
			p.disassociated = false
		} else {
			cpus = online.List()
			p.disassociated = true
		}
	} else {
		allow, err := topology.ParseList(p.key.allow)
		if err != nil {
			return
		}
		m := allow.And(online)
		if m.IsEmpty() {
			m = online
		}
		cpus = m.List()
	}
	if equalInts(cpus, p.cpus) {
		return
	}
	p.cpus = cpus
	for _, wk := range p.workers {
		if wk.tid != 0 {
			_ = sched.SetAffinity(wk.tid, cpus)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
