package wq

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Backpressure: a bound on the items a queue holds (MaxPending).
//
// The kernel's queues are unbounded, and so are gowq's by default. With
// WithMaxPending(n), a queue of max_active m holds at most m+n instances at
// once: the m that max_active lets run, and n that wait. An instance is
// counted from its admission (admit, on the queue path, before it is
// linked on a pwq or chained under a key) until its function returns
// (worker.leaveCount, before flush waiters, a Future or a Group can see
// that it ended), or until it leaves the pending state without running: a
// grab unlinks it from a list or a key's chain, or its owner releases it
// (a refusal, a cancel). So an idle queue takes exactly m+n items queued
// at once, whether or not a worker has started any of them yet (counting
// only the items not yet started would make the bound depend on how fast
// the workers start), and a caller that has seen an item end finds its
// room free (releasing the count with the max_active slot, a moment
// later in afterItem, would make that depend on the worker's speed). The
// price: between an item's return and its worker's bookkeeping, one more
// item may wait on the inactive list than n. Work.pendQ records that the
// pending instance is counted, and on which queue, so that leaving is
// idempotent and a chained item promoted onto the queue, or one requeued
// by the exit path, is not counted twice; when a worker starts the
// instance, the count moves to the worker (worker.bpQ), so that the Work
// may be queued again, as a new instance counted on its own, while it
// runs.
//
// The bound is read at each admission: m is the queue's max_active now
// (SetMaxActive moves the bound, and wakes the waiters). It is one bound
// for the whole queue: a per-CPU queue, whose max_active is per CPU, still
// holds at most m+n items in all.
//
// Armed delayed items do not count while armed: their instance is counted
// when the timer fires and queues it, and that admission is forced (never
// refused), since refusing then would drop work that was accepted when it
// was armed. The count can therefore exceed m+n by the timers that fire
// while the queue is full; new queue calls are refused until it is below
// m+n.
//
// The count is one atomic integer per bounded queue; an unbounded queue
// pays one load of an immutable field on the queue path and one of
// Work.pendQ where an item starts or is unlinked.
type backpressure struct {
	max  int64        // immutable after Alloc: MaxPending's n, 0 for unbounded
	n    atomic.Int64 // counted instances
	full atomic.Bool  // ErrQueueFull was reported since the count last fell

	// The wait for room (queueWait): waiters counts the goroutines
	// waiting; wakeRoom closes ch (and clears it) to wake them all when an
	// instance leaves the count, when max_active changes, or when the
	// queue begins to drain or is destroyed, so that they see the refusal.
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // guarded by mu
}

// MaxPending returns the queue's MaxPending bound n, 0 when unbounded (the
// queue then holds at most MaxActive()+n items). Never blocks.
func (q *Workqueue) MaxPending() int { return int(q.bp.max) }

// limit returns the number of instances q may hold now: max_active plus
// MaxPending. Only for a bounded queue.
func (q *Workqueue) limit() int64 { return int64(q.maxActive.Load()) + q.bp.max }

// admit is the backpressure check of the queue path: it counts w's
// pending instance against q's MaxPending, whose PENDING the caller owns,
// and returns ErrQueueFull when q is full. force counts it even then
// (a timer that fires, an instance that was pending already). An
// instance already counted is admitted again at no cost. Called by
// admitPended (admit.go), the last of the queue path's checks, which
// releases w on an error (undoing nothing, as nothing was counted).
func (q *Workqueue) admit(w *Work, force bool) error {
	if q.bp.max == 0 || w.pendQ != nil {
		return nil
	}
	if force {
		q.bp.n.Add(1)
	} else if !q.reserve() {
		return ErrQueueFull
	}
	w.pendQ = q
	return nil
}

// takePend hands the count of w's pending instance to the worker that
// starts it: it returns the queue whose MaxPending count holds the
// instance (nil if none) and clears w.pendQ, without leaving the count.
// Called by the worker with the pool lock held (processOne).
func (w *Work) takePend() *Workqueue {
	q := w.pendQ
	w.pendQ = nil
	return q
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
	return q.unpendSlot()
}

// unpendSlot takes one instance out of q's MaxPending count and returns
// q, or returns nil for a nil q: a worker's bpQ after the item's slot is
// freed (afterItem), or a pending instance (unpend). The caller wakes q's
// waiters with no pool lock held.
func (q *Workqueue) unpendSlot() *Workqueue {
	if q == nil {
		return nil
	}
	q.bp.n.Add(-1)
	q.bp.full.Store(false)
	return q
}

// leaveCount takes the worker's current instance out of its queue's
// MaxPending count, once its function has returned and before anyone can
// see that it ended, and wakes the waiters for room. On the worker's
// goroutine (bpQ is its own), with no pool lock held: endItem, and a
// Group's or a Future's function (goItem.leaveCount) just before it
// reports its end.
func (wk *worker) leaveCount() {
	if q := wk.bpQ; q != nil {
		wk.bpQ = nil
		q.unpendSlot()
		q.wakeRoom()
	}
}

// unpendWake is unpend followed by wakeRoom. Called with no pool lock held.
func (w *Work) unpendWake() {
	if q := w.unpend(); q != nil {
		q.wakeRoom()
	}
}

// wakeRoom wakes every goroutine waiting for room on q (queueWait). Costs
// one atomic load when nobody waits. Called with no pool lock held: waking
// a goroutine may wake a thread.
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

// QueueContext queues w as Queue does, waiting while the queue is full
// (MaxPending) until an item leaves the count or ctx is done. It returns
// nil when it queued w or w was already pending (or is disabled, or held
// by a CancelSync: Queue's false, the kernel's dedup), ctx.Err() when ctx
// ended first (w is then not queued by this call), and the refusal
// otherwise, without reporting it to the error handler: ErrDestroyed,
// ErrDraining (from outside q's own items while q drains; while Destroy
// drains, an error matching both, as Go returns), ErrNoFunc,
// ErrOtherQueue; an error matching ErrInvalidArgument for a nil q or ctx,
// before anything else. A Destroy or Drain that begins while it waits
// wakes it with that refusal. A ctx that is already done returns
// ctx.Err() and queues nothing. It blocks only while the queue is full: the wait is a
// channel closed when an item of q returns or is cancelled, or
// SetMaxActive changes the bound, never a poll. On an unbounded queue it
// never blocks. Waiters are woken together and race for the room; which
// one gets it is not defined. Safe from any goroutine, also from q's own
// items (a full queue then waits for the other items to end: with
// max_active 1 and the caller the running item, that is a deadlock the
// caller must bound with ctx). GoContext, Submit and Group.Go wait the
// same way.
func (q *Workqueue) QueueContext(ctx context.Context, w *Work) error {
	if q == nil {
		return errNilQueue
	}
	if ctx == nil {
		return errNilContext
	}
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if w == nil || w.fn == nil {
		return ErrNoFunc
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	switch err := q.queueWait(ctx, w); err {
	case errPending, ErrDisabled:
		return nil // Queue would return false: nothing to wait for
	default:
		return err
	}
}

// queueWait queues w on q as queueOnErr does, waiting while q is full
// (MaxPending) until room is made or ctx is done. It returns what
// queueOnErr returns (nil, errPending, ErrDisabled, or the refusal, with
// nothing reported), or ctx.Err() when ctx ended while it waited (w not
// queued). A done ctx does not refuse a queue with room: the wait is the
// only thing ctx bounds. The one wait of every call that takes a context
// (QueueContext, GoContext, Submit, Group.Go).
func (q *Workqueue) queueWait(ctx context.Context, w *Work) error {
	if w == nil || w.fn == nil {
		return ErrNoFunc
	}
	for {
		if err := q.checkOpen(admitNew); err != nil {
			return err
		}
		if q.bp.max == 0 || q.reserve() {
			break
		}
		if err := w.pendable(); err != nil {
			return err // Queue would return false: nothing to wait for
		}
		if h := beforeRoomWait.Load(); h != nil {
			(*h)(q) // tests: a Destroy begins here
		}
		q.bp.waiters.Add(1)
		ch := q.roomChan()
		// Look again after registering: room freed, or a Destroy or
		// Drain begun, before the registration woke nobody.
		if err := q.checkOpen(admitNew); err != nil {
			q.bp.waiters.Add(-1)
			return err
		}
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
	if err := w.pendOn(q); err != nil {
		q.unreserve()
		return err
	}
	if q.bp.max > 0 {
		w.pendQ = q
	}
	// nil, or the refusal of a destroy or drain that began after the
	// checks above (w released, nothing reported), as QueueErr returns it.
	return q.queuePendedErr(cpuUnbound, w, admitNew, nil)
}

// beforeRoomWait, when set (by tests only), is called by queueWait
// between its first look at the queue and its registration as a waiter.
var beforeRoomWait atomic.Pointer[func(q *Workqueue)]

// pendable returns the reason pend would give now without taking PENDING:
// errPending, ErrDisabled, or nil.
func (w *Work) pendable() error {
	old := w.state.Load()
	switch {
	case old&stPending != 0:
		return errPending
	case old&(stCanceling|stDisableMask) != 0:
		return ErrDisabled
	}
	return nil
}

// reserve takes one place of q's MaxPending bound (max_active plus
// MaxPending) for an instance not yet counted; false when q is full.
func (q *Workqueue) reserve() bool {
	lim := q.limit()
	for {
		n := q.bp.n.Load()
		if n >= lim {
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

// backlogStats fills the backlog fields of Stats. Called with statsMu held;
// takes no pool lock (Stats may be called from a tracer under one), only
// the key shards' locks, which no tracer callback runs under.
//
// Pending adds nothing to the queue path: the items on q's lists are the
// max_active counts of q's limits, nrInactive (inactive) plus nrActive
// (on a worklist, a scheduled list, or running), less the running ones
// (started - freed: freed counts with the slot, under the same pool lock,
// because completed counts before flush waiters are released, and an item
// whose Flush returned must not count as waiting while its worker is still
// to free its slot). The counters are read one after the other without
// locks: exact when nothing is queued, started or freed during the call,
// otherwise off by at most those items; never below 0. Adds is one
// counter per pwq, counted where an item is linked (pwq.link), and the
// sum is taken under statsMu, which folds released pwqs: it never
// decreases.
func (q *Workqueue) backlogStats(s *QueueStats, pwqs []*pwq) {
	s.MaxPending = int(q.bp.max)
	var started, freed, adds, listed int64
	for _, st := range append([]*pwqStats{&q.retired}, statsOf(pwqs)...) {
		freed += st.freed.Load()
		started += st.started.Load()
		adds += st.adds.Load()
	}
	for _, l := range q.lims {
		listed += int64(l.nrActive.Load()) + int64(l.nrInactive.Load())
	}
	waiting := max(listed-(started-freed), 0)
	s.Pending = waiting + int64(q.chained())
	s.Adds = adds
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
