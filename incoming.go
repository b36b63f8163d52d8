package wq

// Lock-free queueing onto a pool whose worker is between items.
//
// A queuer normally takes the pool lock to put an item on its pwq (insert)
// and wake a worker (kick). When items come back to back, the queuer and
// the worker that runs them contend for that lock on every item, and a
// contended lock is a futex sleep and wake-up (docs/design.md, "The wake
// path"). So while at least one worker of the pool is between items (it
// has finished an item, or has been woken, and has not yet started the
// next work function or parked: pool.scanners counts these), a queuer
// instead pushes the item onto the pool's incoming stack with one
// compare-and-swap and returns; it takes no lock and wakes no one. Every
// acquisition of the pool lock first moves the incoming items, oldest
// first, to their pwqs exactly as insert would have (drainIncoming), so
// whoever holds the lock sees them in place: the worker that takes the
// lock next, a flush, a cancel, the CM monitor, Stats.
//
// No item is left behind (the Dekker pattern on two sequentially
// consistent atomics): a queuer pushes and then reads scanners; a worker
// that stops being a scanner decrements scanners and then reads the
// incoming stack. At least one of them sees the other: the queuer takes
// the lock itself (which drains and kicks), or the worker drains before it
// runs its work function or parks.
//
// The lock-free path is not used by ordered queues (their order across
// pwqs needs the lock), while a tracer is set (activate_work is traced
// under the lock by the queuer), while the queue drains, or by queues with
// escape_after (the escaper sees only activated items, and the scanner
// may be the worker that is starved of its CPU).
//
// A pwq dies (Destroy's markDead, an attribute change's retireIdle) only
// under its pool lock while it holds no item (markPwqDead). A queuer that
// pushed an item for a pwq that died meanwhile must do what a queue call
// that finds its pwq dead does: retry on the current table, or be refused
// once the queue is destroyed. So after pushing it reads the pwq's dead
// flag (again a Dekker pair with markPwqDead, which marks and then looks
// at the incoming stack): if the pwq is dead, it takes the lock, and a
// drain that finds an item's pwq dead does not link it but bounces it back
// to its queuer (Work.bounced), which goes on as the locked path would.
// An item pushed before the mark is seen by markPwqDead, which then leaves
// the pwq alive and links the item.

// tryPush queues w on pq lock-free if a worker of pq's pool is between
// items (queued: true). It reports handled false, having done nothing,
// when the caller must take the locked path; and handled true, queued
// false, when pq died under the push: the caller then retries as for a
// dead pwq, owning w's PENDING as before. w's PENDING is owned by the
// caller.
func (q *Workqueue) tryPush(reqCPU int, pq *pwq, w *Work) (handled bool) {
	p := pq.pool
	if p.scanners.Load() == 0 || q.ordered || tracer.Load() != nil || q.life.load().refusing() ||
		q.escapeAfter.Load() != 0 {
		// escape_after: the escaper watches only activated items (the
		// worklist of pools that escNotify marked), and a scanner may be
		// the very worker that cannot get its CPU.
		return false
	}
	seq := seqOf(w.state.Load()) // PENDING is ours: stable
	w.queuedAt = nanotime()
	w.inPwq.Store(pq)
	if stagesOn() {
		w.stampLocked() // the "lock taken" stage: where the item is inserted
	}
	p.push(w)
	q.pushed.Add(1)
	if p.scanners.Load() == 0 || pq.deadA.Load() {
		// The worker stopped scanning after our first look (it may have
		// parked without seeing w), or pq died: take the lock, which
		// drains w (or some other lock holder drained it already).
		p.mu.Lock()
		p.mu.Unlock()
		if w.bounced.Load() == seq+1 {
			w.bounced.Store(0)
			w.inPwq.Store(nil)
			q.bounced.Add(1)
			return false // pq was dead when w was drained: retry locked
		}
	}
	return true
}

// push links w onto p's incoming stack.
func (p *pool) push(w *Work) {
	for {
		old := p.incoming.Load()
		w.inNext = old
		if p.incoming.CompareAndSwap(old, w) {
			return
		}
	}
}

// drainIncoming moves every item on p's incoming stack to its pwq, in the
// order they were pushed (link, untraced). An item whose pwq died is not
// linked but bounced to its queuer (see tryPush). Called with mu held
// (every poolMutex.Lock calls it).
func (p *pool) drainIncoming() {
	if lockdep {
		p.assertHeld()
	}
	top := p.incoming.Swap(nil)
	if top == nil {
		return
	}
	var head *Work
	for top != nil { // the stack is newest first: reverse it
		next := top.inNext
		top.inNext = head
		head = top
		top = next
	}
	for w := head; w != nil; {
		next := w.inNext
		w.inNext = nil
		pq := w.inPwq.Load()
		if pq.dead {
			w.bounced.Store(seqOf(w.state.Load()) + 1)
		} else {
			if pq.link(w, false) {
				// Not reached: strict-order limits (ordered queues) never
				// push. Should it happen, scan after the unlock.
				p.mu.scan = pq.lim
			}
			w.inPwq.Store(nil) // after link: grab finds w.pwq first
		}
		w = next
	}
}

// markPwqDead marks pq dead if it holds no item (and, with flush, no
// flush waits on it), and reports whether it did. It then looks at the incoming stack: an item
// pushed for pq before the mark was visible would be bounced by a queuer
// that saw pq alive, so pq is revived and the item linked (then pq is not
// idle). Called with pq.pool.mu held.
func (pq *pwq) markPwqDead(flush bool) bool {
	if lockdep {
		pq.pool.assertHeld()
	}
	p := pq.pool
	for {
		if pq.nrInFlight[0]+pq.nrInFlight[1] != 0 || (flush && pq.flushWaiting) || !pq.inactive.empty() {
			return false
		}
		pq.setDead(true)
		if p.incoming.Load() == nil {
			return true
		}
		pq.setDead(false)
		p.drainIncoming()
	}
}

// setDead sets pq.dead and its lock-free copy. Called with pq.pool.mu held.
func (pq *pwq) setDead(d bool) {
	if lockdep {
		pq.pool.assertHeld()
	}
	pq.dead = d
	pq.deadA.Store(d)
}

// Scanner bookkeeping of a worker (pool.scanners). A worker is a scanner
// from its wake-up to the start of its next work function or its park,
// and from the end of a work function likewise. Rescuers are not, and
// neither are goroutine workers (gopool.go): their pool lock is a
// sync.Mutex, whose contended path is a goroutine hand-off rather than a
// futex sleep, so the push saves little, and the scanner's own
// bookkeeping (a counter shared with the queuer, a lock round to drain
// before each work function) cost a quarter of a back-to-back item
// (docs/decisions.md, "Goroutine workers do not scan").

// scanOn makes wk a scanner. On the worker's goroutine, no lock needed.
func (wk *worker) scanOn() {
	if !wk.scanning && wk.rescuer == nil && wk.gch == nil {
		wk.scanning = true
		wk.pool.scanners.Add(1)
	}
}

// scanOffLocked stops wk being a scanner and drains what was pushed
// meanwhile. Called with the pool lock held.
func (wk *worker) scanOffLocked() {
	if lockdep {
		wk.pool.assertHeld()
	}
	if wk.scanning {
		wk.scanning = false
		wk.pool.scanners.Add(-1)
		wk.pool.drainIncoming()
	}
}

// scanOff stops wk being a scanner, without the pool lock: if an item was
// pushed meanwhile, it takes the lock to drain it (and kick a worker for
// it if the pool's concurrency allows).
func (wk *worker) scanOff() {
	if wk.scanning {
		wk.scanning = false
		p := wk.pool
		p.scanners.Add(-1)
		if p.incoming.Load() != nil {
			p.mu.LockOn(&wk.thread)
			p.mu.Unlock()
		}
	}
}
