package wq

import (
	"context"
	"fmt"
	"strings"
)

// Waiting for a queue and tearing it down: Flush, Drain and Destroy
// (flush_workqueue, drain_workqueue, destroy_workqueue). The bounded
// variants of Destroy and the cancellation calls are in shutdown.go.

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
// ErrDraining. Calling Destroy from one of the queue's own items would
// deadlock: it reports ErrDeadlock and returns without destroying. A second
// Destroy waits for the first. It blocks until the queue is drained.
// See DestroyContext to bound the wait. Mirrors destroy_workqueue().
func (q *Workqueue) Destroy() {
	if q == nil {
		reportNilQueue("destroy_workqueue")
		return
	}
	_ = q.DestroyContext(context.Background())
}

// destroyRest is Destroy after destroyBegin (shutdown.go): it cancels the
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
