package wq

// Batched queueing: the block layer's plug (blk_start_plug /
// blk_finish_plug) for wake-ups. Items are inserted one by one, exactly as
// Queue inserts them; the worker each insertion would wake is recorded in
// a plug instead of being woken at the pool lock's unlock, and each pool
// touched is woken once, after the last insertion. A woken worker then
// finds the whole batch on its worklist: one wake-up (a futex_wake and a
// context switch for a thread worker) for up to len(ws) items.

// wakePlug collects at most one worker to wake per pool. The first
// plugInline pools need no allocation.
type wakePlug struct {
	n      int
	inline [plugInline]*worker
	more   []*worker
}

const plugInline = 8

// hold records wk, which a kick chose for its pool: it replaces an earlier
// worker of the same pool (one wake-up per pool, the latest choice).
func (pl *wakePlug) hold(wk *worker) {
	for i := 0; i < pl.n; i++ {
		if w := pl.at(i); w.pool == wk.pool {
			pl.set(i, wk)
			return
		}
	}
	if pl.n < plugInline {
		pl.inline[pl.n] = wk
	} else {
		pl.more = append(pl.more, wk)
	}
	pl.n++
}

func (pl *wakePlug) at(i int) *worker {
	if i < plugInline {
		return pl.inline[i]
	}
	return pl.more[i-plugInline]
}

func (pl *wakePlug) set(i int, wk *worker) {
	if i < plugInline {
		pl.inline[i] = wk
	} else {
		pl.more[i-plugInline] = wk
	}
}

// finish wakes every held worker, with no lock held.
func (pl *wakePlug) finish() {
	for i := 0; i < pl.n; i++ {
		wk := pl.at(i)
		if stagesOn() {
			wk.unparkStamped()
		} else {
			wk.unpark()
		}
	}
	pl.n = 0
	pl.more = pl.more[:0]
}

// unlockPlugged is Unlock, except that with a plug the worker to wake is
// handed to the plug rather than woken.
func (pm *poolMutex) unlockPlugged(plug *wakePlug) {
	if plug != nil && pm.wake != nil {
		plug.hold(pm.wake)
		pm.wake = nil
	}
	pm.Unlock()
}

// QueueBatch queues every item of ws as Queue would (on the caller's CPU's
// pwq or pod; an item already pending or disabled is skipped, a nil item
// or one without a function is refused with ErrNoFunc, a destroyed or
// draining queue refuses as Queue does) and returns how many it queued.
// The worker wake-ups are held until the last item is inserted: each pool
// touched is woken once, after the last insertion, so that its worker
// finds the whole batch (the block layer's plug, blk_start_plug /
// blk_finish_plug, around queue_work calls). An item that lands on a pool
// whose worker is between items is taken without a wake-up, as with Queue.
// A Work that appears twice in ws is queued twice only if a worker took
// the first instance (it is no longer pending) before the second is
// reached, exactly as two Queue calls would; otherwise the second is
// skipped as pending. The returned count includes both.
// Every exit wakes the pools of the items queued, also a panic or
// runtime.Goexit in an error handler or tracer part-way through.
// Never blocks; no allocation for batches that touch at most 8 pools.
// Safe from any goroutine, also from a work function (then, as Queue, it
// is chained work on a draining queue). A nil q queues nothing and
// reports ErrInvalidArgument.
func (q *Workqueue) QueueBatch(ws ...*Work) int {
	if q == nil {
		reportNilQueue("queue_work_on")
		return 0
	}
	var plug wakePlug
	// Deferred: an error handler or tracer that panics or calls
	// runtime.Goexit part-way through must not lose the wake-ups held
	// for the items already queued.
	defer plug.finish()
	n := 0
	for _, w := range ws {
		if q.result("queue_work_on", w, q.queueOnErr(cpuUnbound, w, &plug)) {
			n++
		}
	}
	return n
}
