package wq

import (
	"fmt"
	"time"
)

// Queueing delayed items: QueueDelayed*, ModDelayed* (queue_delayed_work,
// mod_delayed_work). The timer side is in delayed.go.

// QueueDelayed queues dw after d (d <= 0 queues at once). It returns false
// if dw was already pending or is disabled. For a per-CPU queue the item
// runs on the CPU the caller was on; for an unbound queue on any CPU, as
// the kernel arms an unbound item's timer as a global one
// (add_timer_global), so that a hogged CPU does not hold the item. Never
// blocks. Mirrors queue_delayed_work().
func (q *Workqueue) QueueDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.queueDelayedOn(cpuUnbound, dw, d)
}

// QueueDelayedOn is QueueDelayed on CPU cpu. Mirrors
// queue_delayed_work_on().
func (q *Workqueue) QueueDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil {
		return q.queueDelayedOn(cpu, dw, d) // reports ErrNoFunc
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if cpu < 0 || cpu >= len(q.table.Load().cpu) {
		q.reportError("queue_delayed_work_on", dw.Func(), fmt.Errorf("%w: %d", ErrInvalidCPU, cpu))
		return false
	}
	return q.queueDelayedOn(cpu, dw, d)
}

func (q *Workqueue) queueDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil || dw.fn == nil || !dw.timer.Ready() {
		q.reportError("queue_delayed_work_on", "", ErrNoFunc)
		return false
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if !dw.tryPend() {
		return false
	}
	return dw.arm(q, cpu, d)
}

// ModDelayed changes dw's delay to d, queueing it if it was idle. It
// returns false if dw was idle (and is now queued), true if it was pending
// (and its timer was modified). A disabled item is not queued. While a
// CancelSync or DisableSync holds dw it returns true and queues nothing
// (the canceller wins), also from inside dw's own function. Never blocks
// beyond the few instructions an item is in transit. Mirrors
// mod_delayed_work().
func (q *Workqueue) ModDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.modDelayedOn(cpuUnbound, dw, d)
}

// ModDelayedOn is ModDelayed on CPU cpu. Mirrors mod_delayed_work_on().
func (q *Workqueue) ModDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil {
		return q.modDelayedOn(cpu, dw, d) // reports ErrNoFunc
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if cpu < 0 || cpu >= len(q.table.Load().cpu) {
		q.reportError("mod_delayed_work_on", dw.Func(), fmt.Errorf("%w: %d", ErrInvalidCPU, cpu))
		return false
	}
	return q.modDelayedOn(cpu, dw, d)
}

func (q *Workqueue) modDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil || dw.fn == nil || !dw.timer.Ready() {
		q.reportError("mod_delayed_work_on", "", ErrNoFunc)
		return false
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if dw.runsElsewhere(q) {
		q.reportOtherQueue("mod_delayed_work_on", &dw.Work)
		return false // one instance at a time (instances.go)
	}
	r := dw.grab()
	switch r {
	case grabHeld:
		return true
	case grabSelf:
		q.reportError("mod_delayed_work_on", dw.Func(), ErrDeadlock)
		return false
	}
	was := r == grabPending
	if !was {
		if err := q.refuseElsewhere(&dw.Work); err != nil {
			q.reportError("mod_delayed_work_on", dw.Func(), err)
			return false // started on another queue since the check above
		}
	}
	if was {
		// The instance goes on, re-armed, outside every key (as grab
		// does for a chained one): if it was its key's active instance,
		// the key moves on now instead of waiting for the timer.
		dw.keyedDone(seqOf(dw.state.Load()), true)
	}
	if dw.Disabled() {
		dw.markCancelled()
		dw.release()
		return was
	}
	if was && d <= 0 {
		// A pending instance queued again at once is not a new one:
		// MaxPending does not refuse it.
		_ = q.admit(&dw.Work, true)
	}
	dw.arm(q, cpu, d)
	return was
}
