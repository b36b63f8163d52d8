package wq

import (
	"context"
)

// Flush waits until every item queued before the call has finished
// (items queued later are not waited for), keyed items waiting in their
// key's chain included. It blocks as long as that
// takes; see FlushContext. Called from one of q's own items it would wait
// for itself: it returns at once and reports ErrDeadlock to the error
// handler. Mirrors flush_workqueue().
func (q *Workqueue) Flush() {
	if q == nil {
		reportNilQueue("flush_workqueue")
		return
	}
	_ = q.FlushContext(context.Background())
}

// FlushContext is Flush bounded by ctx: nil once flushed, ctx.Err() if ctx
// ends first (the items keep running), ErrDeadlock from one of q's own
// items, an error matching ErrInvalidArgument for a nil q or ctx.
func (q *Workqueue) FlushContext(ctx context.Context) error {
	if q == nil {
		return errNilQueue
	}
	if ctx == nil {
		return errNilContext
	}
	if q.isChained() {
		// An item waiting for its own color to drain would wait forever.
		q.reportError("flush_workqueue", q.name, ErrDeadlock)
		return ErrDeadlock
	}
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	// A flush abandoned by its context still owns the other color: wait for
	// it to drain before flipping again.
	if prev := q.flushAbandoned; prev != nil {
		select {
		case <-prev:
			q.flushAbandoned = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	kt := q.keyed.Load()
	nKeyed := 0
	if kt != nil {
		nKeyed = keyShards
	}
	done := make(chan struct{})
	q.flushDone = done
	q.flushLeft.Store(int32(len(pwqs)+nKeyed) + 1)
	for _, pq := range pwqs {
		p := pq.pool
		p.mu.Lock()
		old := pq.color
		pq.color ^= 1
		if pq.nrInFlight[old] == 0 {
			p.mu.Unlock()
			q.flushPwqDone()
			continue
		}
		pq.flushWaiting = true
		p.mu.Unlock()
	}
	// Keyed items still waiting in their key's chain are not on any pwq
	// yet: each key-table shard has flush colors of its own.
	for i := 0; i < nKeyed; i++ {
		if !kt.shards[i].flip() {
			q.flushPwqDone()
		}
	}
	q.flushPwqDone()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		q.flushAbandoned = done
		return ctx.Err()
	}
}

func (q *Workqueue) flushPwqDone() {
	if q.flushLeft.Add(-1) == 0 {
		close(q.flushDone)
	}
}
