package wq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Backpressure: a bound on the items waiting on a queue (MaxPending).
//
// The kernel's queues are unbounded, and so are gowq's by default. With
// WithMaxPending(n), a queue admits a new pending instance only while fewer
// than n are counted. An instance is counted from its admission (admit,
// on the queue path, before it is linked on a pwq or chained under a key)
// until it leaves the pending state on q: a worker dequeues it to start
// it (processOne), a grab unlinks it from a list or a key's chain, or its
// owner releases it (a refusal, a cancel). Work.pendQ records that the
// instance is counted, and on which queue, so that leaving is idempotent
// and a chained item promoted onto the queue, or one requeued by the exit
// path, is not counted twice.
//
// Armed delayed items do not count while armed: their instance is counted
// when the timer fires and queues it, and that admission is forced (never
// refused), since refusing then would drop work that was accepted when it
// was armed. So is the requeue of an instance that was already pending
// (ModDelayed with no delay, a dequeued item put back by a worker's exit
// path). The count can therefore exceed n by the timers that fire while
// the queue is full; new queue calls are refused until it is below n.
//
// The count is one atomic integer per bounded queue; an unbounded queue
// pays one load of an immutable field on the queue path and one of
// Work.pendQ where an item starts or is unlinked.
type backpressure struct {
	max  int64        // immutable after Alloc: MaxPending's n, 0 for unbounded
	n    atomic.Int64 // counted instances
	full atomic.Bool  // ErrQueueFull was reported since the count last fell

	// QueueContext's wait list: waiters counts the goroutines waiting
	// for room; wakeRoom closes ch (and clears it) to wake them all when
	// an instance leaves the count, or when the queue begins to drain or
	// is destroyed, so that they see the refusal.
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // guarded by mu
}

// WithMaxPending bounds the items that may wait on the queue at once to n:
// items queued and not yet started, on the worklists, on the inactive
// lists (over max_active) and in keys' chains (QueueKeyed). Past that,
// Queue, QueueOn, QueueNode, QueueKeyed, and QueueDelayed and ModDelayed
// with no delay, return false and report ErrQueueFull to the error handler
// (once until the count falls again, like ErrDraining); QueueContext waits
// for room. An item starts counting when it is queued and stops when a
// worker starts it or it is cancelled. Delayed items count from the
// moment their timer queues them, not while armed, and a timer that fires
// is never refused: the count may then exceed n for a while. Items that
// q's own items queue (chained work) are bounded like any other. n = 0
// (the default) is unbounded, as the kernel's queues are; a negative n
// makes Alloc fail with ErrInvalidArgument. A gowq extension, with pond's
// WithQueueSize and ants' WithMaxBlockingTasks as precedents.
func WithMaxPending(n int) Option { return func(o *options) { o.maxPending = n } }

// MaxPending returns the queue's MaxPending bound, 0 when unbounded.
// Never blocks.
func (q *Workqueue) WithMaxPending() int { return int(q.bp.max) }

// admit is the backpressure check of the queue path: it counts w's
// pending instance against q's MaxPending, whose PENDING the caller owns,
// and returns ErrQueueFull when q is full. force counts it even then
// (a timer that fires, an instance that was pending already). An
// instance already counted is admitted again at no cost. The callers
// that return a bool turn an error into false and reportRefused; the
// caller releases w (which undoes nothing, as nothing was counted).
func (q *Workqueue) admit(w *Work, force bool) error {
	if q.bp.max == 0 || w.pendQ != nil {
		return nil
	}
	if force {
		q.bp.n.Add(1)
	} else {
		for {
			n := q.bp.n.Load()
			if n >= q.bp.max {
				return ErrQueueFull
			}
			if q.bp.n.CompareAndSwap(n, n+1) {
				break
			}
		}
	}
	w.pendQ = q
	return nil
}

// unpend takes w's instance out of its queue's MaxPending count, if it is
// counted, and returns that queue (nil otherwise), whose waiters the
// caller wakes once it holds no pool lock (wakeRoom). Called by the owner
// of w's PENDING, or under the pool lock of the list that holds w.
func (w *Work) unpend() *Workqueue {
	q := w.pendQ
	if q == nil {
		return nil
	}
	w.pendQ = nil
	q.bp.n.Add(-1)
	q.bp.full.Store(false)
	return q
}

// unpendWake is unpend followed by wakeRoom. Called with no pool lock held.
func (w *Work) unpendWake() {
	if q := w.unpend(); q != nil {
		q.wakeRoom()
	}
}

// wakeRoom wakes every QueueContext waiting on q. Costs one atomic load
// when nobody waits. Called with no pool lock held: waking a goroutine
// may wake a thread.
func (q *Workqueue) wakeRoom() {
	if q.bp.waiters.Load() == 0 {
		return
	}
	q.bp.mu.Lock()
	if q.bp.ch != nil {
		close(q.bp.ch)
		q.bp.ch = nil
	}
	q.bp.mu.Unlock()
}

// roomChan returns the channel that the next wakeRoom closes.
func (q *Workqueue) roomChan() chan struct{} {
	q.bp.mu.Lock()
	defer q.bp.mu.Unlock()
	if q.bp.ch == nil {
		q.bp.ch = make(chan struct{})
	}
	return q.bp.ch
}

// reportRefused reports a queue call refused by the queue path's check
// err (admit) to the error handler: ErrQueueFull once until the count
// falls again (a producer that keeps queueing on a full queue would
// otherwise report at its own rate).
func (q *Workqueue) reportRefused(op string, w *Work, err error) {
	if err == ErrQueueFull {
		if q.bp.full.Load() || !q.bp.full.CompareAndSwap(false, true) {
			return
		}
		err = fmt.Errorf("%w: %s: %d items pending (MaxPending); reported once until one leaves", ErrQueueFull, q.name, q.bp.max)
	}
	q.reportError(op, w.Func(), err)
}

// QueueContext queues w as Queue does, waiting while the queue is full
// (MaxPending) until an item leaves the pending state or ctx is done. It
// returns nil when it queued w or w was already pending (or is disabled,
// or held by a CancelSync: Queue's false, the kernel's dedup), ctx.Err()
// when ctx ended first (w is then not queued by this call), and the
// refusal otherwise, without reporting it to the error handler:
// ErrDestroyed, ErrDraining (from outside q's own items while q drains;
// while Destroy drains, an error matching both, as Go returns), ErrNoFunc,
// ErrOtherQueue. A ctx that is already done returns ctx.Err() and queues
// nothing. It blocks only while the queue is full: the wait is a channel
// closed when an item of q starts or is cancelled, never a poll. On an
// unbounded queue it never blocks. Waiters are woken together and race
// for the room; which one gets it is not defined. Safe from any
// goroutine, also from q's own items (a full queue then waits for the
// other items to start: with max_active 1 and the caller the running
// item, that is a deadlock the caller must bound with ctx).
func (q *Workqueue) QueueContext(ctx context.Context, w *Work) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if w == nil || w.fn == nil {
		return ErrNoFunc
	}
	for {
		if err := q.refusal(); err != nil {
			return err
		}
		if q.bp.max == 0 || q.reserve() {
			break
		}
		if w.state.Load()&(stPending|stCanceling|stDisableMask) != 0 {
			return nil // Queue would return false: nothing to wait for
		}
		q.bp.waiters.Add(1)
		ch := q.roomChan()
		// Look again after registering: room freed before the
		// registration woke nobody.
		if q.reserve() {
			q.bp.waiters.Add(-1)
			break
		}
		select {
		case <-ch:
			q.bp.waiters.Add(-1)
		case <-ctx.Done():
			q.bp.waiters.Add(-1)
			return ctx.Err()
		}
	}
	// A reserved slot (bounded queue) goes to w's instance, or back.
	if !w.tryPend() {
		q.unreserve()
		return nil
	}
	if q.bp.max > 0 {
		w.pendQ = q
	}
	// nil, or the refusal of a destroy or drain that began after the
	// checks above (w released, nothing reported), as QueueErr returns it.
	return q.queuePendedErr(cpuUnbound, w, false, nil)
}

// refusal returns the error a queue call from the caller would be
// refused with now, without the MaxPending check: ErrDestroyed, or
// ErrDraining from outside q's own items while q drains (an error that
// matches ErrDestroyed too while Destroy drains); nil otherwise.
func (q *Workqueue) refusal() error {
	if q.destroyed.Load() {
		return ErrDestroyed
	}
	if q.draining.Load() != 0 && !q.isChained() {
		if q.dying.Load() {
			return errDestroying // matches ErrDestroyed and ErrDraining, as Go's
		}
		return ErrDraining
	}
	return nil
}

// reserve takes one slot of q's MaxPending bound for an instance not yet
// pended; false when q is full.
func (q *Workqueue) reserve() bool {
	for {
		n := q.bp.n.Load()
		if n >= q.bp.max {
			return false
		}
		if q.bp.n.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// unreserve gives back a slot taken by reserve and not used.
func (q *Workqueue) unreserve() {
	if q.bp.max > 0 {
		q.bp.n.Add(-1)
		q.wakeRoom()
	}
}

// backlogStats fills the backlog fields of Stats. Called with q.mu held;
// takes no pool lock (Stats may be called from a tracer under one), only
// the key shards' locks, which no tracer callback runs under.
//
// It adds nothing to the queue path: the items on q's lists are the
// max_active counts of q's limits, nrInactive (inactive) plus nrActive
// (on a worklist, a scheduled list, or running), less the running ones
// (started - freed: freed counts with the slot, under the same pool lock,
// because completed counts before flush waiters are released, and an item
// whose Flush returned must not count as waiting while its worker is still
// to free its slot). An item counts as added once it is started, waiting,
// or was unlinked by a grab. The counters are read one after the other
// without locks: exact when nothing is queued, started or freed during
// the call, otherwise off by at most those items; never below 0.
func (q *Workqueue) backlogStats(s *QueueStats, pwqs []*pwq) {
	s.MaxPending = int(q.bp.max)
	var started, freed, unlinked, listed int64
	for _, st := range append([]*pwqStats{&q.retired}, statsOf(pwqs)...) {
		freed += st.freed.Load()
		started += st.started.Load()
		unlinked += st.unlinked.Load()
	}
	for _, l := range q.lims {
		listed += int64(l.nrActive.Load()) + int64(l.nrInactive.Load())
	}
	waiting := max(listed-(started-freed), 0)
	s.Pending = waiting + int64(q.chained())
	s.Adds = started + waiting + unlinked
}

func statsOf(pwqs []*pwq) []*pwqStats {
	out := make([]*pwqStats, len(pwqs))
	for i, pq := range pwqs {
		out[i] = &pq.stats
	}
	return out
}

// chained returns the number of keyed items waiting in their key's chain
// on q. Takes each key shard's lock in turn; O(keys in flight).
func (q *Workqueue) chained() int {
	t := q.keyed.Load()
	if t == nil {
		return 0
	}
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, ks := range sh.m {
			n += ks.chain.Len()
		}
		sh.mu.Unlock()
	}
	return n
}

// RunningStats describes the items of one queue that run now (client-go's
// unfinished work and longest running processor).
type RunningStats struct {
	Items      int           // items of the queue executing now
	Unfinished time.Duration // the sum of how long each has run so far
	Longest    time.Duration // how long the oldest has run, 0 when none runs
}

// Running returns the items of q that workers of its pools execute now,
// and how long they have run. Items run by the rescuer or the escaper are
// not included. It takes each of q's pool locks briefly, so it must not be
// called from a tracer callback (unlike Stats). Safe from any goroutine.
func (q *Workqueue) Running() RunningStats {
	q.mu.Lock()
	pools := make([]*pool, 0, len(q.allPwqs))
	seen := map[*pool]bool{}
	for _, pq := range q.allPwqs {
		if !seen[pq.pool] {
			seen[pq.pool] = true
			pools = append(pools, pq.pool)
		}
	}
	q.mu.Unlock()
	var r RunningStats
	for _, p := range pools {
		p.mu.Lock()
		now := nanotime()
		for _, wk := range p.workers {
			if wk.current == nil || wk.currentPwq == nil || wk.currentPwq.wq != q {
				continue
			}
			d := time.Duration(now - wk.currentAt)
			r.Items++
			r.Unfinished += d
			r.Longest = max(r.Longest, d)
		}
		p.mu.Unlock()
	}
	return r
}
