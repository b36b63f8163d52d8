package wq

import (
	"context"
)

// Bounded shutdown and cancellation: DestroyContext, the background half
// of DrainContext, CancelPending and Work.CancelSyncContext.
//
// Destroy is split in two. destroyBegin, under destroyMu, makes the queue
// refuse new work at once (draining, arming closed) and hands out the
// channel that the rest closes; destroyRest cancels the armed items,
// drains and releases the pools, and runs exactly once. Destroy, and a
// DestroyContext whose ctx can never end, run it on their own goroutine
// (so the error handler sees the ErrDelayedPending report on the
// destroyer's goroutine); a DestroyContext whose ctx can end runs it on a goroutine
// of its own and waits for it or for ctx, so that a deadline never stops
// a drain half way: the queue finishes its drain alone, and every later
// Destroy or DestroyContext waits for that same channel.

// DestroyContext is Destroy bounded by ctx. From its start the queue
// refuses new work: queue calls from outside q's own items return false
// (ErrDraining while the drain runs, ErrDestroyed once destroyed) and
// arming a delayed item on q is refused. It returns nil once the queue is
// destroyed, ctx.Err() when ctx ends first, and ErrDeadlock (also reported
// to the error handler) when called from one of q's own items, which would
// wait for itself; then nothing is done. After ctx.Err() the queue keeps
// refusing new work and finishes its drain on its own (on a goroutine of
// its own), then releases its pools; a later Destroy or DestroyContext
// waits for that same drain, and Stats and Queues show the queue until it
// is over. Concurrent calls all wait for the one destroy. A ctx that is
// already done still begins the destroy and returns ctx.Err() at once,
// or nil when the destroy is over by then (an empty queue may be
// destroyed that fast; a destroyed queue always returns nil). A nil q or
// ctx returns an error matching ErrInvalidArgument and begins nothing.
// Safe from any goroutine.
// A gowq extension of destroy_workqueue(), like ants' ReleaseContext.
func (q *Workqueue) DestroyContext(ctx context.Context) error {
	if q == nil {
		return errNilQueue
	}
	if ctx == nil {
		return errNilContext // before the destroy begins: nothing changes
	}
	if q.isChained() {
		q.reportError("destroy_workqueue", q.name, ErrDeadlock)
		return ErrDeadlock
	}
	done, first := q.destroyBegin()
	if first {
		if ctx.Done() == nil {
			// Nothing can cut the wait short: run the destroy here.
			q.destroyRun(done)
			return nil
		}
		go q.destroyRun(done)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		select {
		case <-done: // both ready: the destroy is over, say so
			return nil
		default:
			return ctx.Err()
		}
	}
}

// destroyBegin makes q refuse new work and returns the channel that is
// closed when the destroy is over; first is true for the caller that must
// run destroyRest (destroyRun), false when a destroy had begun already.
func (q *Workqueue) destroyBegin() (done chan struct{}, first bool) {
	q.destroyMu.Lock()
	defer q.destroyMu.Unlock()
	if q.destroyDone != nil {
		return q.destroyDone, false
	}
	done = make(chan struct{})
	q.destroyDone = done
	// Under mu: no attribute change installs pwqs from now on. From here
	// the queue refuses new work from outside its own items, with
	// refusals that match ErrDestroyed too (admit.go), reported afresh.
	q.mu.Lock()
	q.life.update(func(s lifeWord) lifeWord { return (s | lifeDestroying) &^ lifeRepDraining })
	q.mu.Unlock()
	q.timerMu.Lock()
	q.timersClosed = true // closeTimers cancels what is armed already
	q.timerMu.Unlock()
	q.wakeRoom() // QueueContext waiters see the refusal
	return done, true
}

// destroyRun runs destroyRest and then releases the destroy's waiters,
// also when an error handler ends the goroutine (runtime.Goexit).
func (q *Workqueue) destroyRun(done chan struct{}) {
	defer close(done)
	q.destroyRest()
}

// drainOn finishes, in the background, a drain whose DrainContext gave up,
// and only then lets the queue accept work again.
func (q *Workqueue) drainOn() {
	defer q.endDrain()
	_ = q.drainLoop(context.Background())
}

// CancelPending cancels every item queued on q and not yet started, and
// returns how many it cancelled. That is: the items on q's worklists and
// inactive lists (also those waiting behind a running instance of
// themselves), the keyed items waiting in their key's chain (QueueKeyed),
// and the delayed items whose timer is armed on q. Each is cancelled as by
// Work.Cancel: it is idle afterwards, its flush waiters are released, and
// a key's chain moves on. Items running now are not touched (CancelPending
// does not wait for them; Drain or Flush does), nor are items that the
// rescuer or the escaper has taken to run next. Items queued while it
// runs may or may not be cancelled. The queue stays usable: new items are
// accepted as before. Followed by Destroy, the counterpart of client-go's
// ShutDown; pond's Stop and StopAndWait run the queued tasks, as
// DestroyContext and Destroy do. It blocks only for the pool and key-table
// locks it takes in turn. Safe from any goroutine, also from q's own items. A gowq
// extension; the kernel has no counterpart.
func (q *Workqueue) CancelPending() int {
	if q == nil {
		reportNilQueue("cancel_pending")
		return 0
	}
	n := 0
	// Timers first, so that none fires onto a list already swept; then
	// chains, so that cancelling a key's active item does not promote the
	// next one onto a list swept already.
	n += q.cancelArmed()
	n += q.cancelChained()
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	for _, pq := range pwqs {
		n += pq.cancelListed()
	}
	return n
}

// cancelArmed cancels q's armed delayed items.
func (q *Workqueue) cancelArmed() int {
	q.timerMu.Lock()
	var armed []*DelayedWork
	for dw := q.armed.Front(); dw != nil; dw = dw.tnode.Next() {
		armed = append(armed, dw)
	}
	q.timerMu.Unlock()
	n := 0
	for _, dw := range armed {
		if dw.stopTimerOn(q) { // we own the armed instance now
			dw.markCancelled()
			dw.release()
			n++
		}
	}
	return n
}

// cancelChained cancels the keyed items waiting in the chains of q's keys.
// Taken out of each chain as grabChained does, then cancelled with no
// lock held (markCancelled may move a key on).
func (q *Workqueue) cancelChained() int {
	t := q.keyed.Load()
	if t == nil {
		return 0
	}
	var taken []*Work
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		for _, ks := range sh.m {
			for w := ks.chain.Front(); w != nil; w = ks.chain.Front() {
				ks.remove(w)
				if ks.active != w {
					w.kst.Store(nil)
				}
				sh.doneLocked(w.kcolor)
				taken = append(taken, w)
			}
		}
		sh.mu.Unlock()
	}
	for _, w := range taken {
		w.unpendWake()
		w.markCancelled()
		w.release()
	}
	return len(taken)
}

// cancelListed cancels pq's items that are queued and not started: on its
// inactive list, on the pool's worklist, and on workers' scheduled lists.
// They are unlinked under the pool lock (which makes their PENDING ours,
// as grabFromPwq does) and cancelled after it, since markCancelled may
// queue a key's next item.
func (pq *pwq) cancelListed() int {
	p := pq.pool
	var taken []*Work
	p.mu.Lock()
	// Inactive items first: unlinking an active one frees a slot, which
	// would activate them onto the worklist.
	for w := pq.inactive.head(); w != nil; w = pq.inactive.head() {
		pq.unlink(w)
		taken = append(taken, w)
	}
	scan := false
	take := func(l *workList) {
		for w := l.head(); w != nil; {
			next := w.next()
			if w.pwq.Load() == pq {
				scan = pq.unlink(w) || scan
				taken = append(taken, w)
			}
			w = next
		}
	}
	take(&p.worklist)
	for _, wk := range p.workers {
		take(&wk.scheduled)
	}
	p.mu.Unlock()
	if scan {
		pq.lim.scan(pq)
	}
	if len(taken) > 0 {
		pq.wq.wakeRoom()
	}
	for _, w := range taken {
		w.markCancelled()
		w.release()
		cancelGoItem(w) // a Go item's Group or Future ends with ErrCancelled
	}
	return len(taken)
}

// CancelSyncContext is CancelSync bounded by ctx: it cancels the item like
// Cancel, then waits for a running instance to finish, holding the item
// as CancelSync does, until ctx ends. It returns (true, nil) if the item
// was pending and no instance runs any more, (false, nil) if it was idle;
// when ctx ends first, the pending instance (if any) is cancelled all the
// same, the hold is dropped, the running instance goes on, and it returns
// (wasPending, ctx.Err()). Called from inside the item's own function it
// does not wait and returns ErrDeadlock (also reported, as CancelSync
// does); the item is still cancelled. A ctx already done cancels without
// waiting. A nil ctx returns (false, an error matching ErrInvalidArgument)
// and cancels nothing. A gowq extension of cancel_work_sync().
func (w *Work) CancelSyncContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, errNilContext
	}
	for {
		r := w.grab()
		switch r {
		case grabHeld:
			if !w.join() {
				continue
			}
			err := w.waitRunningContext(ctx)
			w.unhold()
			if err == ErrDeadlock {
				reportError("cancel_work_sync", w.Func(), err) // after unhold: the handler may Goexit
			}
			return false, err
		case grabSelf:
			reportError("cancel_work_sync", w.Func(), ErrDeadlock)
			return false, ErrDeadlock
		}
		w.markCancelled()
		w.hold()
		err := w.waitRunningContext(ctx)
		w.unhold()
		if err == ErrDeadlock {
			reportError("cancel_work_sync", w.Func(), err)
		}
		return r == grabPending, err
	}
}

// waitRunningContext is waitRunning bounded by ctx: nil once no instance
// runs, ErrDeadlock from inside the item, ctx.Err() when ctx ends first.
func (w *Work) waitRunningContext(ctx context.Context) error {
	w.mu.Lock()
	if w.running == 0 {
		w.mu.Unlock()
		return nil
	}
	if w.selfRunning() {
		w.mu.Unlock()
		return ErrDeadlock
	}
	ch := w.waiterLocked(w.runSeq)
	w.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.dropWaiter(ch)
		return ctx.Err()
	}
}
