package wq

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/timer"
	"github.com/gowq/wq/internal/topology"
)

// Adaptive placement (escape_after, a gowq extension: the kernel has no
// such attribute).
//
// A per-CPU queue with escape_after > 0 runs an item on the CPU that queued
// it when a worker of that CPU's pool starts it within escape_after of its
// activation (the time it reached the pool's worklist: its queueing, or
// for an item held back by max_active, the moment a slot freed). An item
// still waiting after that is run elsewhere by the queue's escaper: a
// rescuer-like thread (rescuer.go, escape mode) that attaches to the
// stalled pool (curPool), takes the queue's overdue items off its worklist
// and runs them with the pool's item loop (processOne), under that pool's
// lock. The item stays on its pwq, so its flush color, its max_active
// slot, non-reentrance, Cancel/Disable (grab finds it on the worklist or
// on the escaper's scheduled list, like any item) and the ordered
// guarantee are unchanged; only the CPU differs.
//
// The escaper runs on another CPU of the queue's CPUs, never the stalled
// one, in this order of preference: the stalled CPU's SMT siblings, its
// last-level-cache pod, its NUMA node, any online CPU. It takes the
// narrowest of these sets that holds another CPU as its affinity (the
// kernel's scheduler picks the CPU within it), and the pool's class (RT for
// RT|PerCPU queues). Its affinity and class are set once per escape (not
// per item) and only when they change.
//
// Detection: pwq.activate marks the pool (escWatch) when the item's queue
// has escape_after set: one atomic load on every activation, and a store
// when the mark was clear. The CM monitor (cm.go) scans the worklist head
// of every marked pool and sleeps until the earliest item falls due; an
// overdue item sends its pwq to the queue's escaper (as a mayday does),
// whose thread is woken by futex. A scan that finds no eligible item
// clears the mark. For escHold (10 ms) after it last saw a marked pool,
// the monitor never sleeps longer than the shortest escape_after of the
// live queues (at least cmFastPoll), so that it finds newly marked pools
// without being woken: waking it from the queueing path (a channel send
// inside the pool lock) doubled the lab's idle p50 of escape queues when
// it happened for every item. After escHold without a mark it sleeps as
// usual (escWake set), and the first marking activation wakes it: one
// channel send per quiet period. Measured on the lab VM, one item per
// 100 ms for 2 s (so one wake-up and 10 ms of polling per item): process
// CPU 48 ms with escape off, 115 ms with escape_after 20 us, 35 ms with
// 200 us (noise). Polling at 20 us for a whole second of sparse items
// had cost 577 ms.
//
// Worst case, from activation to the start elsewhere: escape_after, plus
// up to one more escape_after (at least cmFastPoll, 20 us) until the
// monitor's next sample (after a quiet period: the monitor's wake-up
// through a Go channel, a few us to tens of us, plus cmFastPoll), plus the escaper's wake-up and its affinity change (a futex wake and
// two system calls), plus the pool lock if the stalled CPU's worker or
// queuer was preempted holding it. One escaper per queue runs the overdue
// items one after another; two stalled CPUs share it.

// wakeHook, when set (tests), is called by a pool worker each time it is
// woken, before it takes the pool lock; blocking in it models a worker
// that cannot get its CPU (a CPU hogged by a higher-priority thread).
var wakeHook atomic.Pointer[func(p *pool)]

// escMin is the shortest escape_after (ns) of the live queues, 0 when no
// queue escapes. Recomputed on every escape_after write and Destroy.
var escMin atomic.Int64

// escMinMu serializes recomputeEscMin: the read of the queues and the
// store of their minimum must not interleave with another recomputation,
// or a stale minimum can be stored last.
var escMinMu sync.Mutex

func recomputeEscMin() {
	escMinMu.Lock()
	defer escMinMu.Unlock()
	var m int64
	for _, q := range liveQueues() {
		if ea := q.escapeAfter.Load(); ea > 0 && (m == 0 || ea < m) {
			m = ea
		}
	}
	escMin.Store(m)
}

// escHold is how long after it last saw a marked pool the CM monitor keeps
// polling at escape_after; after that it sleeps as usual and the next
// marking activation wakes it (escWake).
const escHold = 10 * time.Millisecond

// escWake is set by the CM monitor while it sleeps past escape_after
// (quiet for escHold, or in deep idle); the next activation that marks a
// pool then wakes it (escNotify).
var escWake atomic.Bool

// escNotify marks p as holding items that may escape and wakes the CM
// monitor if it sleeps past them. Called with p.mu held.
func (p *pool) escNotify() {
	if lockdep {
		p.assertHeld()
	}
	if p.escWatch.Load() {
		return
	}
	p.escWatch.Store(true)
	if escWake.Load() || cmMon.idle.Load() {
		select {
		case cmMon.wake <- struct{}{}:
		default:
		}
	}
}

// escScanMax bounds the worklist scan of one pool per sample: items behind
// the first escScanMax are younger than those before them, except for
// items that max_active held back, and items of other queues (per-CPU
// pools are shared by every per-CPU queue of a class) can fill the first
// escScanMax. So once per escDeepEvery a pool whose worklist is longer
// is scanned to its end: an overdue item behind escScanMax items of other
// queues escapes at most escDeepEvery late, and a long worklist costs one
// full scan per escDeepEvery under the pool lock (about 5 ns an item),
// not one per sample.
const (
	escScanMax   = 64
	escDeepEvery = time.Millisecond
)

// escScan looks at the head of p's worklist for items of escape queues.
// Overdue ones send their pwq to the queue's escaper (appending the
// escaper to wake after the lock is dropped). It returns the earliest time
// (ns) at which a scan should look again, 0 when p holds no eligible item
// (the mark is then cleared). Called by the CM monitor without locks.
func (p *pool) escScan(now int64, wake []*worker) (int64, []*worker) {
	var next int64
	soon := func(t int64) {
		if next == 0 || t < next {
			next = t
		}
	}
	p.mu.Lock()
	n := 0
	limit := escScanMax
	var sent *pwq
	x := p.worklist.head()
	for ; x != nil; x = x.next() {
		if n == limit {
			if now-p.escDeepAt < int64(escDeepEvery) {
				break
			}
			p.escDeepAt = now
			limit = -1 // to the end
		}
		n++
		pq := x.pwq.Load()
		if pq == nil || pq == sent {
			continue
		}
		ea := pq.wq.escapeAfter.Load()
		if ea <= 0 {
			continue
		}
		// Deadlines saturate: escape_after may be as long as an int64
		// of ns, and a wrapped sum would make the item overdue at once.
		if now-x.activeAt < ea {
			soon(timer.Deadline(x.activeAt, time.Duration(ea)))
			continue
		}
		// Look again after another threshold: the escaper takes every
		// overdue item of pq before it leaves the pool.
		soon(timer.Deadline(now, max(time.Duration(ea), cmFastPoll)))
		sent = pq
		if r := pq.wq.escaper.Load(); r != nil {
			if wk := r.mayday(pq); wk != nil {
				wake = append(wake, wk)
			}
		}
	}
	if x != nil {
		// Items past the window: the next deep scan looks at them.
		soon(p.escDeepAt + int64(escDeepEvery))
	}
	if next == 0 {
		p.escWatch.Store(false)
	}
	p.mu.Unlock()
	return next, wake
}

// escDue returns the first item of pq on p's worklist if it has waited at
// least ea since its activation, else nil. It looks as far as pq's first
// item, which escScan may have found past escScanMax; only the escaper
// calls it, once per item it takes. Called with p.mu held.
func (p *pool) escDue(pq *pwq, now, ea int64) *Work {
	if lockdep {
		p.assertHeld()
	}
	for x := p.worklist.head(); x != nil; x = x.next() {
		if x.pwq.Load() != pq {
			continue
		}
		if now-x.activeAt >= ea {
			return x
		}
		return nil
	}
	return nil
}

// escapeTarget returns the CPUs the escaper may run on to take items off
// stalled CPU cpu's pool: the narrowest of cpu's SMT pod, cache pod, NUMA
// node and all online CPUs that holds an online CPU other than cpu, without
// cpu. Empty on a one-CPU machine. A stalled pool whose CPU is offline
// (cpu not online) gets every online CPU.
func escapeTarget(topo *topology.Topology, cpu int) topology.CPUSet {
	online := topo.Online
	self := topology.NewCPUSet(cpu)
	if !online.Has(cpu) {
		return online
	}
	for _, s := range []topology.Scope{topology.ScopeSMT, topology.ScopeCacheShard, topology.ScopeCache, topology.ScopeNUMA, topology.ScopeSystem} {
		if c := topo.Pod(s, cpu).And(online).AndNot(self); !c.IsEmpty() {
			return c
		}
	}
	return online.AndNot(self)
}

// escapeFrom runs pq's overdue items off pq's pool on another CPU. Called
// on the escaper's thread with no lock held; false when the thread was
// lost (the escaper has been replaced), as rescue.
func (r *rescuer) escapeFrom(wk *worker, pq *pwq) bool {
	p := pq.pool
	ea := pq.wq.escapeAfter.Load()
	p.mu.Lock()
	if p.dead || ea <= 0 || p.escDue(pq, nanotime(), ea) == nil {
		p.mu.Unlock()
		return true
	}
	cpu, c := p.key.cpu, p.key.class
	p.mu.Unlock()
	target := escapeTarget(currentTopology(), cpu)
	if target.IsEmpty() {
		return true // nowhere to go: the pool's worker runs it
	}
	if k := target.String(); k != r.escCPUs {
		if sched.SetAffinity(0, target.List()) != nil {
			return true
		}
		r.escCPUs = k
	}
	if !r.escClassSet || r.escClass != c {
		if sched.SetAttr(0, sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice}) == nil {
			r.escClass, r.escClassSet = c, true
		}
	}
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return true
	}
	wk.curPool.Store(p)
	for {
		x := p.escDue(pq, nanotime(), ea)
		if x == nil {
			break
		}
		p.worklist.remove(x)
		if rn := x.runner.Load(); rn != nil && rn != wk && rn.curPool.Load() == p && rn.current == x {
			// Non-reentrance: it runs now on the pool; it runs again
			// after, on the same worker (move_linked_works).
			rn.scheduled.pushBack(x)
			continue
		}
		if !wk.processOne(x) {
			return false
		}
		if !wk.processScheduled() {
			return false
		}
	}
	wk.curPool.Store(nil)
	p.kick()
	p.mu.Unlock()
	return true
}

// SetEscapeAfter sets escape_after of a per-CPU queue (a gowq extension,
// no kernel counterpart): an item that no worker of its CPU's pool has
// started d after it was activated is run by the queue's escaper on
// another CPU, preferring the same SMT core, then the same cache, then the
// same node (see docs/design.md, "Adaptive placement"). 0 turns it off.
// The change applies to items already queued. Errors (nothing changes):
// ErrInvalidArgument for d < 0 or an unbound queue (unbound items already
// run on any CPU of their pod), ErrDestroyed after Destroy. Never blocks
// for long; no thread is created before the first escape. If the thread
// gate refuses the escaper's thread then (ErrThreadLimit, reported at
// most every 10 s), the item is not escaped and runs on its own CPU; the
// next escape tries again.
func (q *Workqueue) SetEscapeAfter(d time.Duration) error {
	return q.applyAttrs("escape_after", func(a *Attrs) error {
		if q.unbound {
			return fmt.Errorf("%w: only per-CPU queues escape (unbound items already run anywhere in their pod)", ErrInvalidArgument)
		}
		a.EscapeAfter = d
		return nil
	})
}
