package wq

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
)

// The queue's lifecycle: the state word that admission checks, Drain
// (drain_workqueue), Destroy (destroy_workqueue) and their bounded
// variants, and CancelPending. Flush is in flush.go.

// The lifecycle is one word, lifeState: live; draining(n), while n Drain
// calls run; destroying, from the start of Destroy; destroyed, once its
// drain is over and the pools are released. What each entry accepts:
//
//	entry                        live  draining(n)  destroying     destroyed
//	new, from outside q's items  yes   ErrDraining  errDestroying  ErrDestroyed
//	new, from q's own items      yes   yes          yes            (none runs)
//	armed, from outside          yes   ErrDraining  errDestroying  ErrDestroyed
//	armed, from q's own items    yes   yes          errDestroying  (none runs)
//	comes back                   yes   yes          yes (*)        ErrDestroyed
//
// "New" is Queue*, Go*, Submit, Group.Go, QueueKeyed*, QueueBatch,
// QueueContext, and QueueDelayed*/ModDelayed* of an idle item with no
// delay; "armed" the same two with a delay. "Comes back" is an instance
// admitted before: a timer that fired, DelayedWork.Flush of the armed
// instance, a key's next item, and ModDelayed of an instance pending on q
// that passed its lifecycle check, which ModDelayed makes before its grab
// as for a new instance (re-armed, or queued at once where arming is
// closed): from outside q's items while q drains, ModDelayed is refused
// and the pending instance stays as it was. An instance ModDelayed takes
// off another queue after that check is new for q but not checked again
// for the lifecycle (admitMoved): it is gone from the other queue, and a
// drain or destroy that began since waits for it. errDestroying
// matches ErrDestroyed and ErrDraining. MaxPending applies to new
// instances when they are queued (an armed one when its timer fires),
// never to those that come back. (*) An armed instance taken off its timer
// after Destroy closed the timers is cancelled and reported with the
// other armed items (ErrDelayedPending): Destroy cancels what is armed.
// Chained work is accepted while q drains, as is_chained_work allows:
// the drain waits for the item that queues it, so it cannot be left
// behind.
//
// Two report bits ride on the word: ErrDestroyed is reported once per
// queue, ErrDraining once per drain (a new drain clears its bit).
//
// Why the pwqs need a closed state of their own (pwq.dead), beside the
// queue's word. The word is read without a lock, before the item is
// linked: a queuer may read "live", be preempted, and link its item after
// Destroy's drain found q empty; its item would then sit on a pwq whose
// pool Destroy released, and never run. Destroy therefore ends its drain
// by marking every pwq dead, under each pool lock, only while the pwq is
// empty (markDead): a queuer that links first makes the marking fail and
// Destroy drains again; a queuer that comes after finds its pwq dead and
// is refused once the word says destroyed. The word alone would lose such
// items; the dead marks alone would make every queue call take a pool
// lock to learn that q is closing, and could not express Drain, which
// keeps the pwqs. The timers are the same pair: timersClosed under
// timerMu closes arming, and firing counts the armed instances taken off
// the armed list (a timer that fired, DelayedWork.Flush, ModDelayed) until
// they are queued, so that closeTimers, which Destroy runs before its
// drain, waits for them instead of draining past them.
type lifeState struct{ w atomic.Uint64 }

// lifeWord is a value of lifeState.
type lifeWord uint64

const (
	lifeDrainMask   lifeWord = 1<<32 - 1 // Drain calls in progress (draining(n))
	lifeDestroying  lifeWord = 1 << 32   // Destroy began
	lifeDestroyed   lifeWord = 1 << 33   // Destroy finished its drain
	lifeRepDestroy  lifeWord = 1 << 34   // ErrDestroyed was reported
	lifeRepDraining lifeWord = 1 << 35   // ErrDraining was reported in the current drain
)

func (l *lifeState) load() lifeWord { return lifeWord(l.w.Load()) }

// update applies f to the word atomically and returns the new word.
func (l *lifeState) update(f func(lifeWord) lifeWord) lifeWord {
	for {
		old := l.w.Load()
		nw := f(lifeWord(old))
		if l.w.CompareAndSwap(old, uint64(nw)) {
			return nw
		}
	}
}

// destroyed: every entry is refused.
func (s lifeWord) destroyed() bool { return s&lifeDestroyed != 0 }

// destroying: Destroy began (also once it is over); no attribute change
// installs pwqs from then on.
func (s lifeWord) destroying() bool { return s&(lifeDestroying|lifeDestroyed) != 0 }

// refusing: new instances from outside q's own items are refused.
func (s lifeWord) refusing() bool { return s&(lifeDrainMask|lifeDestroying|lifeDestroyed) != 0 }

// drains is the n of draining(n).
func (s lifeWord) drains() int { return int(s & lifeDrainMask) }

// beginDrain enters draining (Drain): one more drain, its report to come.
func (q *Workqueue) beginDrain() {
	q.life.update(func(s lifeWord) lifeWord { return (s + 1) &^ lifeRepDraining })
}

// endDrain leaves one drain.
func (q *Workqueue) endDrain() { q.life.update(func(s lifeWord) lifeWord { return s - 1 }) }

// Drain waits until the queue is empty, flushing repeatedly; keyed items
// waiting in their key's chain (QueueKeyed) count as queued. While it
// drains only items running on the queue may queue onto it (chained work);
// other queue attempts return false and report ErrDraining. Mirrors
// drain_workqueue().
func (q *Workqueue) Drain() {
	if q == nil {
		reportNilQueue("drain_workqueue")
		return
	}
	_ = q.DrainContext(context.Background())
}

// DrainContext is Drain bounded by ctx: nil once the queue is empty,
// ErrDeadlock from one of q's own items, an error matching
// ErrInvalidArgument for a nil q or ctx (nothing begins), and ctx.Err()
// when ctx ends first. In that case the drain goes on in the background (on a goroutine
// of its own) and the queue stays in draining mode until it completes:
// meanwhile queue calls from outside q's own items keep returning false
// with ErrDraining (reported once per drain), exactly as during the wait.
// A later Drain, DrainContext or Destroy waits for the queue to be empty
// as usual. So a deadline bounds the caller's wait, never what the queue
// accepts.
func (q *Workqueue) DrainContext(ctx context.Context) error {
	if q == nil {
		return errNilQueue
	}
	if ctx == nil {
		return errNilContext
	}
	if q.isChained() {
		q.reportError("drain_workqueue", q.name, ErrDeadlock)
		return ErrDeadlock
	}
	q.beginDrain()
	q.wakeRoom() // QueueContext waiters see ErrDraining
	if err := q.drainLoop(ctx); err != nil {
		// The queue keeps refusing until the drain completes: one that
		// gave up would accept work it never drained (drainOn).
		go q.drainOn()
		return err
	}
	q.endDrain()
	return nil
}

func (q *Workqueue) drainLoop(ctx context.Context) error {
	for {
		if err := q.FlushContext(ctx); err != nil {
			return err
		}
		if q.inFlight() == 0 && q.keyedN.Load() == 0 {
			return nil
		}
	}
}

// drainOn finishes, in the background, a drain whose DrainContext gave up,
// and only then lets the queue accept work again.
func (q *Workqueue) drainOn() {
	defer q.endDrain()
	_ = q.drainLoop(context.Background())
}

// inFlight returns the number of items queued, inactive or running.
func (q *Workqueue) inFlight() int {
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	n := 0
	for _, pq := range pwqs {
		pq.pool.mu.Lock()
		n += pq.nrInFlight[0] + pq.nrInFlight[1]
		pq.pool.mu.Unlock()
	}
	return n
}

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

// Destroy drains the queue, including work that its items queue onto it
// while it drains and keyed items waiting in their key's chain (QueueKeyed),
// then releases its pools and threads. Delayed items whose
// timer is still armed on the queue are cancelled, not waited for (the
// kernel requires them cancelled before destroy_workqueue): they are left
// idle, so another queue can take them, and reported to the error handler
// as ErrDelayedPending naming them, as kthread's Destroy does. From the
// start of Destroy, arming a delayed item on the queue is refused. After
// Destroy returns no item of the queue is pending or running, Queue
// returns false and reports ErrDestroyed once, and attribute writes return
// ErrDestroyed. While it drains, queue calls from outside the queue's own
// items are refused: Queue reports ErrDraining, and QueueErr, Go and the
// other error calls return an error matching both ErrDestroyed and
// ErrDraining. Calling Destroy from one of the queue's own items, or from
// the tracer's queue_work of an item bound for the queue, would deadlock:
// it reports ErrDeadlock and returns without destroying. A second
// Destroy waits for the first. It blocks until the queue is drained.
// See DestroyContext to bound the wait. Mirrors destroy_workqueue().
func (q *Workqueue) Destroy() {
	if q == nil {
		reportNilQueue("destroy_workqueue")
		return
	}
	_ = q.DestroyContext(context.Background())
}

// DestroyContext is Destroy bounded by ctx. From its start the queue
// refuses new work: queue calls from outside q's own items return false
// (ErrDraining while the drain runs, ErrDestroyed once destroyed) and
// arming a delayed item on q is refused. It returns nil once the queue is
// destroyed, ctx.Err() when ctx ends first, and ErrDeadlock (also reported
// to the error handler) when called from one of q's own items, or from the
// tracer's queue_work of an item bound for q, which would wait for
// itself; then nothing is done. After ctx.Err() the queue keeps
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
	if q.isChained() || q.inTransitTo() {
		// From q's own item, or from the tracer's queue_work of an item
		// bound for q: the destroy would wait for the caller.
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

// destroyRest is Destroy after destroyBegin: it cancels the
// armed items, drains the queue and releases its pools. It runs once, on
// the first destroyer's goroutine (DestroyContext with a deadline: on a
// goroutine of its own).
func (q *Workqueue) destroyRest() {
	cancelled := q.closeTimers()
	for {
		_ = q.drainLoop(context.Background())
		// A queue call that passed the draining check just before it was
		// set may still be on its way to a pwq. Mark every pwq dead while
		// it is empty; such a call then finds it dead and is refused. If
		// one got in first, its item must run: unmark and drain again.
		if q.markDead() {
			break
		}
	}
	q.life.update(func(s lifeWord) lifeWord { return s | lifeDestroyed })
	q.wakeRoom() // QueueContext waiters see ErrDestroyed
	unregisterQueue(q)
	if q.rescuer != nil {
		q.rescuer.stop()
	}
	if r := q.escaper.Load(); r != nil {
		r.stop()
		recomputeEscMin()
	}
	q.mu.Lock()
	pwqs := q.allPwqs
	q.releasePwqs(nil, pwqs) // Stats stay readable after Destroy
	for _, pq := range pwqs {
		pq.lim.removePwq(pq)
	}
	q.table.Store(&pwqTable{cpu: q.table.Load().cpu[:0:0]})
	q.mu.Unlock()
	seen := map[*pool]int{}
	for _, pq := range pwqs {
		seen[pq.pool]++
	}
	for p, n := range seen {
		for range n {
			p.put()
		}
	}
	if len(cancelled) > 0 {
		q.reportError("destroy_workqueue", q.name, fmt.Errorf("%w: %s: %d armed item(s) cancelled: %s",
			ErrDelayedPending, q.name, len(cancelled), strings.Join(cancelled, ", ")))
	}
}

// markDead marks every pwq of q dead if all of them are empty, and
// reports whether it did; otherwise it leaves them all alive.
func (q *Workqueue) markDead() bool {
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	for i, pq := range pwqs {
		p := pq.pool
		p.mu.Lock()
		empty := pq.markPwqDead(false)
		p.mu.Unlock()
		if !empty {
			for _, done := range pwqs[:i] {
				done.pool.mu.Lock()
				done.setDead(false)
				done.pool.mu.Unlock()
			}
			return false
		}
	}
	return true
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
