package wq

import (
	"sync"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqtrace"
)

// pwq is a pool workqueue: the link between one Workqueue and one pool
// (struct pool_workqueue). It holds the queue's inactive items for that
// pool and its flush accounting.
type pwq struct {
	wq   *Workqueue
	pool *pool
	lim  *activeLimit // shared by the pwqs that share one max_active

	inactive     workList    // guarded by pool.mu: items over max_active, in order
	nrInFlight   [2]int      // guarded by pool.mu: items per flush color (queued, inactive or running)
	color        uint8       // guarded by pool.mu: color given to new items
	flushWaiting bool        // guarded by pool.mu: a flush waits for color^1 to drain
	dead         bool        // guarded by pool.mu: retired and released; queueing retries on the current table
	deadA        atomic.Bool // lock-free copy of dead, for tryPush (set with setDead)

	stats pwqStats
}

// activeLimit enforces max_active over a set of pwqs: one pwq for a per-CPU
// queue, every pwq of a NUMA node for an unbound queue (wq_node_nr_active).
//
// An inserter counts itself in nrInactive before trying for a slot, and a
// completer reads nrInactive after giving its slot back; with those two
// orders an item can never be left inactive while a slot is free.
type activeLimit struct {
	// ordered: the limit of an ordered queue (max_active 1). With more than
	// one pwq (after an attribute change), items are activated strictly
	// oldest pwq first, which is queue order: new items go only to the
	// newest pwq (the kernel plugs the new pwq until the old one drains).
	ordered    bool
	npwqs      atomic.Int32 // len(pwqs)
	max        atomic.Int32
	nrActive   atomic.Int32
	nrInactive atomic.Int32
	frozen     atomic.Bool

	mu   sync.Mutex // guards pwqs
	pwqs []*pwq     // guarded by mu: in creation order, oldest first
}

func (l *activeLimit) tryInc() bool {
	for {
		n := l.nrActive.Load()
		if n >= l.max.Load() || l.frozen.Load() {
			return false
		}
		if l.nrActive.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (l *activeLimit) addPwq(pq *pwq) {
	l.mu.Lock()
	l.pwqs = append(l.pwqs, pq)
	l.npwqs.Store(int32(len(l.pwqs)))
	l.mu.Unlock()
}

func (l *activeLimit) removePwq(pq *pwq) {
	l.mu.Lock()
	for i, x := range l.pwqs {
		if x == pq {
			l.pwqs = append(l.pwqs[:i], l.pwqs[i+1:]...)
			break
		}
	}
	l.npwqs.Store(int32(len(l.pwqs)))
	l.mu.Unlock()
}

// strictOrder reports whether activation must go through scan, oldest pwq
// first.
func (l *activeLimit) strictOrder() bool { return l.ordered && l.npwqs.Load() > 1 }

// scan activates inactive items of every pwq in l while slots are free,
// oldest pwq first, skipping skip (whose pool lock the caller just held).
// Called with no pool lock held.
func (l *activeLimit) scan(skip *pwq) {
	if l.nrInactive.Load() == 0 {
		return
	}
	l.mu.Lock()
	pwqs := append([]*pwq(nil), l.pwqs...)
	l.mu.Unlock()
	for _, pq := range pwqs {
		if l.nrInactive.Load() == 0 {
			return
		}
		pq.pool.mu.Lock()
		first := !pq.inactive.empty()
		pq.activateInactive()
		pq.pool.mu.Unlock()
		if l.ordered && first {
			// Strict order: only the oldest pwq that holds items may
			// activate; a newer one must not take a slot freed meanwhile.
			return
		}
	}
}

// insert links a pending item into the pwq: on the pool's worklist if a
// max_active slot is free and nothing is waiting before it, else on the
// inactive list. Called with pool.mu held. It returns true when the caller
// must run lim.scan after unlocking (an ordered queue with several pwqs).
// Mirrors insert_work/__queue_work.
func (pq *pwq) insert(w *Work) bool {
	if lockdep {
		pq.pool.assertHeld()
	}
	w.queuedAt = nanotime()
	return pq.link(w, true)
}

// link is insert for an item whose queuedAt is set (a drained push,
// incoming.go); trace false skips the activate_work event (a drain runs
// inside another thread's Lock, where a tracer must not run). Called with
// pool.mu held.
func (pq *pwq) link(w *Work, trace bool) bool {
	if lockdep {
		pq.pool.assertHeld()
	}
	w.color = pq.color
	pq.stats.adds.Add(1)
	pq.nrInFlight[w.color]++
	w.pwq.Store(pq)
	l := pq.lim
	l.nrInactive.Add(1)
	if l.strictOrder() {
		pq.inactive.pushBack(w)
		return true
	}
	if pq.inactive.empty() && l.tryInc() {
		l.nrInactive.Add(-1)
		w.activeAt = w.queuedAt
		pq.activateT(w, trace)
		return false
	}
	pq.inactive.pushBack(w)
	return false
}

// activate puts w on the pool's worklist and kicks the pool.
func (pq *pwq) activate(w *Work) { pq.activateT(w, true) }

func (pq *pwq) activateT(w *Work, trace bool) {
	p := pq.pool
	p.worklist.pushBack(w)
	if pq.wq.escapeAfter.Load() != 0 {
		p.escNotify() // adaptive placement (escape.go)
	}
	if t := tracer.Load(); t != nil && trace {
		// Traced under the pool lock, so that no worker starts w first. A
		// tracer that calls runtime.Goexit here leaves with the pool
		// kicked and unlocked (no caller of activate defers the unlock).
		emit(t, &wqtrace.Event{Kind: wqtrace.ActivateWork, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: sched.Gettid(), Work: w.addr(), Function: w.Func(), Workqueue: pq.wq.name},
			func() { p.kick(); p.mu.Unlock() })
	}
	p.kick()
}

// activateInactive moves inactive items to the worklist while slots are
// free (pwq_activate_first_inactive). Called with pool.mu held.
func (pq *pwq) activateInactive() {
	if lockdep {
		pq.pool.assertHeld()
	}
	for !pq.inactive.empty() && pq.lim.tryInc() {
		w := pq.inactive.popFront()
		pq.lim.nrInactive.Add(-1)
		// escape_after counts from here; stamped also while the queue's
		// escape_after is 0, as it may be set while w waits.
		w.activeAt = nanotime()
		pq.activate(w)
	}
}

// complete accounts for an item that finished running: it frees the
// max_active slot, activates what waits, and updates flush accounting.
// Called with pool.mu held; returns true if other pwqs of the limit may
// have inactive items (the caller then runs lim.scan without the lock).
// Mirrors pwq_dec_nr_in_flight.
func (pq *pwq) complete(color uint8) bool {
	if lockdep {
		pq.pool.assertHeld()
	}
	pq.lim.nrActive.Add(-1)
	pq.doneInFlight(color)
	return pq.afterSlotFreed()
}

func (pq *pwq) afterSlotFreed() bool {
	if pq.lim.strictOrder() {
		return pq.lim.nrInactive.Load() > 0
	}
	pq.activateInactive()
	if pq.lim.nrInactive.Load() == 0 {
		return false
	}
	pq.lim.mu.Lock()
	n := len(pq.lim.pwqs)
	pq.lim.mu.Unlock()
	return n > 1
}

// unlink removes a pending item from the worklist or inactive list for a
// cancel. Called with pool.mu held; the return is as for complete.
func (pq *pwq) unlink(w *Work) bool {
	if lockdep {
		pq.pool.assertHeld()
	}
	w.pwq.Store(nil)
	w.unpend() // the grabber wakes QueueContext waiters (grabFromPwq)
	pq.doneInFlight(w.color)
	if w.list() == &pq.inactive {
		pq.inactive.remove(w)
		pq.lim.nrInactive.Add(-1)
		return false
	}
	w.list().remove(w) // the worklist, or a worker's scheduled list
	pq.lim.nrActive.Add(-1)
	return pq.afterSlotFreed()
}

func (pq *pwq) doneInFlight(color uint8) {
	pq.nrInFlight[color]--
	if pq.flushWaiting && color != pq.color && pq.nrInFlight[color] == 0 {
		pq.flushWaiting = false
		pq.wq.flushPwqDone()
	}
}

// pwqStats are the wq_monitor.py counters of one pwq. All atomic.
type pwqStats struct {
	started      atomic.Int64 // total: items that started executing
	completed    atomic.Int64 // items that finished (infl = started - completed)
	cpuTimeNs    atomic.Int64 // CPU time of workers running the queue's items
	cpuIntensive atomic.Int64 // CPUitsv: CPU-intensive violations
	cmWakeups    atomic.Int64 // CMW: concurrency-management wake-ups
	repatriated  atomic.Int64 // RPR: items started after moving a worker back into its pod
	mayday       atomic.Int64 // mayday requests sent to the rescuer
	rescued      atomic.Int64 // items run by the rescuer
	escaped      atomic.Int64 // ESC: items run off their CPU by the escaper (escape_after)
	panics       atomic.Int64 // work functions that panicked
	adds         atomic.Int64 // items linked into the pwq (Stats' Adds), counted in link
	freed        atomic.Int64 // started items whose max_active slot was freed after their run (Stats' Pending)
	latency      latencyHist  // queue-to-start
	exec         latencyHist  // execution time (start to end)
	pwait        latencyHist  // thread workers' wait for a P after futex_wait (park.go)
	// folded is set by addFrom before it moves the counters to the
	// queue's (the pwq retired): a later CPU charge moves itself there
	// too (chargeCPU).
	folded atomic.Bool
}

func (s *pwqStats) observeLatency(ns int64) { s.latency.observe(ns) }

// chargeCPU adds ns of CPU time to pq's counter, or to its queue's
// (q.retired) once pq retired: a worker charges what it owes at its next
// clock read, which may come after an attribute change or Destroy retired
// pq and folded its counters (addFrom). A Dekker pair with addFrom, which
// sets folded and then takes the counter with a swap: a charge that the
// swap missed sees folded and moves itself; one that it took is moved
// once, by the swap. Safe from any goroutine.
func (pq *pwq) chargeCPU(ns int64) {
	s := &pq.stats
	s.cpuTimeNs.Add(ns)
	if s.folded.Load() {
		if v := s.cpuTimeNs.Swap(0); v != 0 {
			pq.wq.retired.cpuTimeNs.Add(v)
		}
	}
}

// addFrom adds o's counters to s (a retired pwq's counters to its queue's).
func (s *pwqStats) addFrom(o *pwqStats) {
	o.folded.Store(true) // before the counter is taken: see chargeCPU
	s.started.Add(o.started.Load())
	s.completed.Add(o.completed.Load())
	s.cpuTimeNs.Add(o.cpuTimeNs.Swap(0))
	s.cpuIntensive.Add(o.cpuIntensive.Load())
	s.cmWakeups.Add(o.cmWakeups.Load())
	s.repatriated.Add(o.repatriated.Load())
	s.mayday.Add(o.mayday.Load())
	s.rescued.Add(o.rescued.Load())
	s.escaped.Add(o.escaped.Load())
	s.panics.Add(o.panics.Load())
	s.adds.Add(o.adds.Load())
	s.freed.Add(o.freed.Load())
	s.latency.addFrom(&o.latency)
	s.exec.addFrom(&o.exec)
	s.pwait.addFrom(&o.pwait)
}
