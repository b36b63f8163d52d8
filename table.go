package wq

import "github.com/gowq/wq/internal/topology"

// The per-CPU / per-pod pwq table of a workqueue: building and
// installing it (apply_workqueue_attrs, wq_update_pod), retiring idle
// pools, the per-node max_active split, and the choice of a pwq for an
// item (the first half of __queue_work).

// pwqTable maps each possible CPU to the pwq that serves items queued
// from or on it. Replaced as a whole on attribute changes and hotplug.
type pwqTable struct {
	cpu  []*pwq // indexed by CPU id
	dfl  *pwq   // unbound: for CPUs outside the queue's cpumask
	pods []*pwq // unbound: one per pod, in pod order
}

// installTable builds the CPU -> pwq table for the current attributes and
// topology and installs it. Old pwqs keep their items, which run to
// completion on their old pools. Called with mu held.
func (q *Workqueue) installTable(topo *topology.Topology) {
	q.statsMu.Lock()
	q.statsPolicy = q.attrs.policy
	q.statsMu.Unlock()
	ncpu := topo.Possible.Last() + 1
	if n := topo.Online.Last() + 1; n > ncpu {
		ncpu = n
	}
	t := &pwqTable{cpu: make([]*pwq, ncpu)}
	maxA := int(q.maxActive.Load())
	if !q.unbound {
		for len(q.lims) < ncpu {
			l := &activeLimit{}
			l.max.Store(int32(maxA))
			l.frozen.Store(q.frozen.Load()) // a CPU hot-added while frozen
			q.addLim(l)
		}
		online := topo.Online
		for c := 0; c < ncpu; c++ {
			cpus := []int{c}
			if !online.Has(c) {
				cpus = online.List()
			}
			p := getPool(poolKey{cpu: c, class: q.attrs.class}, cpus)
			t.cpu[c] = q.newPwq(p, q.lims[c])
		}
		q.table.Store(t)
		return
	}
	if q.attrs.scopeDefault {
		q.attrs.scope = defaultScope()
	}
	mask := effectiveCPUs(q.attrs.cpus, topo.Online, unboundMask.Load())
	pods := topo.Pods(q.attrs.scope)
	// Judged once per install, for every pool of the table: the threads'
	// nices (sched.RuntimeNice) may change between two reads. A strict
	// queue is never goroutine-backed, and otherwise every pool's allow
	// is mask.
	goro := q.goroutineBacked(mask, topo.Online)
	if goro {
		// Goroutine workers run on any CPU: pods would only split the
		// queue over pools that differ in nothing (gopool.go).
		pods = []topology.CPUSet{mask}
	}
	// One activeLimit per node, reused across attribute changes.
	nodeLim := func(node int) *activeLimit {
		idx := 0
		if !q.ordered {
			idx = node
		}
		for len(q.lims) <= idx {
			l := &activeLimit{ordered: q.ordered}
			l.frozen.Store(q.frozen.Load())
			q.addLim(l)
		}
		return q.lims[idx]
	}
	mkPwq := func(pod topology.CPUSet) *pwq {
		allow := mask
		if q.attrs.strict {
			allow = pod
		}
		key := poolKey{cpu: -1, class: q.attrs.class, pod: pod.String(), allow: allow.String(), strict: q.attrs.strict,
			goro: goro}
		p := getPool(key, allow.List())
		return q.newPwq(p, nodeLim(topo.NodeOf(pod.First())))
	}
	t.dfl = mkPwq(mask)
	for _, pod := range pods {
		pm := pod.And(mask)
		if pm.IsEmpty() {
			continue
		}
		var pq *pwq
		if pm.Equal(mask) {
			pq = t.dfl
		} else {
			pq = mkPwq(pm)
		}
		t.pods = append(t.pods, pq)
		for _, c := range pm.List() {
			if c < ncpu {
				t.cpu[c] = pq
			}
		}
	}
	for c := range t.cpu {
		if t.cpu[c] == nil {
			t.cpu[c] = t.dfl
		}
	}
	q.setNodeMax(topo)
	q.table.Store(t)
}

// reinstall rebuilds q's table for topo and releases the retired pwqs that
// hold no items. Called without q.mu.
func (q *Workqueue) reinstall(topo *topology.Topology) {
	q.mu.Lock()
	if q.life.load().destroying() {
		q.mu.Unlock()
		return
	}
	q.installTable(topo)
	puts := q.retireIdle()
	q.mu.Unlock()
	putPools(puts)
}

// retireIdle releases the pwqs that the current table no longer uses and
// that hold no items: they are marked dead (a queue call that picked one
// from an old table retries), leave their limit and q.allPwqs, and their
// counters move to q.retired. It returns the pools to put once q.mu is
// released. Called with q.mu held. Retired pwqs that still hold items stay
// until a later call.
func (q *Workqueue) retireIdle() []*pool {
	t := q.table.Load()
	current := make(map[*pwq]bool, len(t.cpu)+len(t.pods)+1)
	for _, pq := range t.cpu {
		current[pq] = true
	}
	for _, pq := range t.pods {
		current[pq] = true
	}
	if t.dfl != nil {
		current[t.dfl] = true
	}
	var puts []*pool
	var released []*pwq
	keep := make([]*pwq, 0, len(q.allPwqs))
	for _, pq := range q.allPwqs {
		if current[pq] {
			keep = append(keep, pq)
			continue
		}
		p := pq.pool
		p.mu.Lock()
		idle := pq.markPwqDead(true)
		p.mu.Unlock()
		if !idle {
			keep = append(keep, pq)
			continue
		}
		pq.lim.removePwq(pq)
		released = append(released, pq)
		puts = append(puts, p)
	}
	q.releasePwqs(keep, released)
	return puts
}

// releasePwqs makes keep q's pwqs and folds the counters of released,
// which leave it, into q.retired, in one step for Stats: a counter is
// never seen twice, nor missing for a moment. The pools' failed
// creations stay counted (goneErrs). Called with q.mu held.
func (q *Workqueue) releasePwqs(keep, released []*pwq) {
	q.statsMu.Lock()
	defer q.statsMu.Unlock()
	q.allPwqs = keep
	for _, pq := range released {
		q.retired.addFrom(&pq.stats)
		p := pq.pool
		if n := p.createErrN.Load(); n > 0 {
			if q.goneErrs == nil {
				q.goneErrs = map[*pool]goneErr{}
			}
			g := goneErr{n: n}
			if m := p.createErrMsg.Load(); m != nil {
				g.msg = *m
			}
			q.goneErrs[p] = g
		}
	}
}

// goneErr is what a pool's failed worker creations were when q released
// its last pwq on it (Stats' CreateErrors stays monotonic).
type goneErr struct {
	n   int64
	msg string
}

// addLim appends l to q.lims. Called with q.mu held.
func (q *Workqueue) addLim(l *activeLimit) {
	q.statsMu.Lock()
	q.lims = append(q.lims, l)
	q.statsMu.Unlock()
}

func putPools(ps []*pool) {
	for _, p := range ps {
		p.put()
	}
}

// setNodeMax splits max_active over NUMA nodes in proportion to their
// online CPUs, each node getting at least min(max_active, 8)
// (wq_update_node_max_active). Called with mu held.
func (q *Workqueue) setNodeMax(topo *topology.Topology) {
	maxA := int(q.maxActive.Load())
	if q.ordered || !q.unbound {
		for _, l := range q.lims {
			l.max.Store(int32(maxA))
		}
		return
	}
	total := topo.Online.Len()
	floor := min(maxA, DefaultMinActive)
	for node, l := range q.lims {
		n := nodeCPUs(topo, node).Len()
		v := maxA
		if total > 0 {
			v = (maxA*n + total - 1) / total
		}
		l.max.Store(int32(max(v, floor)))
	}
}

func (q *Workqueue) newPwq(p *pool, l *activeLimit) *pwq {
	pq := &pwq{wq: q, pool: p, lim: l}
	l.addPwq(pq)
	q.statsMu.Lock()
	q.allPwqs = append(q.allPwqs, pq)
	q.statsMu.Unlock()
	return pq
}

// pickPwq chooses the pwq for an item queued on reqCPU (cpuUnbound: the
// caller's CPU). It returns the pwq and the CPU it stands for; nil once
// the queue is destroyed.
func (q *Workqueue) pickPwq(reqCPU int, w *Work) (*pwq, int) {
	t := q.table.Load()
	if len(t.cpu) == 0 {
		return nil, reqCPU // destroyed: the table is empty
	}
	cpu := reqCPU
	var pq *pwq
	if (cpu == cpuUnbound || cpu >= len(t.cpu)) && q.unbound && len(t.pods) <= 1 {
		// One pod: every CPU maps to the same pwq, no need to ask getcpu.
		pq = t.dfl
	} else {
		if cpu == cpuUnbound || cpu >= len(t.cpu) {
			cpu = currentCPU()
			if cpu >= len(t.cpu) {
				cpu = 0
			}
		}
		pq = t.cpu[cpu]
	}
	// Non-reentrance: if the item still runs on a pool of this queue, queue
	// it there so that it runs after, not beside, itself. Ordered queues
	// always queue on the newest pwq, which keeps queue order across
	// attribute changes; their max_active of 1, shared by all their pwqs,
	// keeps them non-reentrant.
	if r := w.runner.Load(); r != nil && !q.ordered {
		if rp := r.curPwq.Load(); rp != nil && rp.wq == q {
			pq = rp
		}
	}
	return pq, cpu
}
