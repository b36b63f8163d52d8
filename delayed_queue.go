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
// (add_timer_global), so that a hogged CPU does not hold the item. The
// queue's lifecycle applies with or without a delay (docs/go-users.md,
// "Edges"): from outside q's own items while q drains it returns false and
// reports ErrDraining; from the start of Destroy nothing is armed on q
// (false, reported); on a destroyed queue false and ErrDestroyed (reported
// once). A nil q returns false and reports ErrInvalidArgument. Never
// blocks. Mirrors queue_delayed_work().
func (q *Workqueue) QueueDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.queueDelayedOn("queue_delayed_work", cpuUnbound, dw, d)
}

// QueueDelayedOn is QueueDelayed on CPU cpu; a cpu that does not exist
// returns false and reports ErrInvalidCPU. Mirrors
// queue_delayed_work_on().
func (q *Workqueue) QueueDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	return q.queueDelayedOn("queue_delayed_work_on", cpu, dw, d)
}

// checkDelayed is the part of admit.go's order that comes before the
// item is touched, for the delayed entries: the queue, the function, the
// cpu (cpuUnbound: none asked).
func (q *Workqueue) checkDelayed(cpu int, dw *DelayedWork) error {
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if dw == nil || dw.fn == nil || !dw.timer.Ready() {
		return ErrNoFunc
	}
	if cpu != cpuUnbound && (cpu < 0 || cpu >= len(q.table.Load().cpu)) {
		return fmt.Errorf("%w: %d", ErrInvalidCPU, cpu)
	}
	return nil
}

func (q *Workqueue) queueDelayedOn(op string, cpu int, dw *DelayedWork, d time.Duration) bool {
	if q == nil {
		reportNilQueue(op)
		return false
	}
	if err := q.checkDelayed(cpu, dw); err != nil {
		return q.result(op, workOf(dw), err)
	}
	if err := dw.pendOn(q); err != nil {
		return q.result(op, &dw.Work, err) // pending or disabled: false, not reported
	}
	return q.result(op, &dw.Work, dw.arm(q, cpu, d, admitNew))
}

// workOf returns dw's Work, nil for a nil dw.
func workOf(dw *DelayedWork) *Work {
	if dw == nil {
		return nil
	}
	return &dw.Work
}

// ModDelayed changes dw's delay to d, queueing it if it was idle. It
// returns false if dw was idle (and is now queued), true if it was pending
// (and its timer was modified). A disabled item is not queued. While a
// CancelSync or DisableSync holds dw it returns true and queues nothing
// (the canceller wins), also from inside dw's own function.
//
// Admission (docs/go-users.md, "Edges"): before it touches dw,
// ModDelayed is checked as QueueDelayed is: on a destroyed queue, from
// outside q's own items while q drains or Destroy runs, or while dw runs
// on another queue, it returns false, reports the reason and leaves dw as
// it was (a pending instance stays pending where it is). Then an
// instance that was pending on q is re-armed, or queued, without counting
// against MaxPending (it is not new); an idle item, or one pending on
// another queue, is a new instance for q: MaxPending applies when it is
// queued, and an instance taken from another queue onto a full q is
// cancelled (ErrQueueFull reported). The lifecycle check made before the
// grab stands for the instance taken: a Drain or Destroy of q that
// begins after it waits for that instance (queued at once where Destroy
// closed arming), as for a Queue that passed its check. From one of q's own items while
// Destroy runs, an instance pending on q whose re-arming Destroy closed
// is queued at once instead. Never blocks beyond the few instructions an
// item is in transit. Mirrors mod_delayed_work().
func (q *Workqueue) ModDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.modDelayedOn("mod_delayed_work", cpuUnbound, dw, d)
}

// ModDelayedOn is ModDelayed on CPU cpu; a cpu that does not exist
// returns false and reports ErrInvalidCPU. Mirrors mod_delayed_work_on().
func (q *Workqueue) ModDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	return q.modDelayedOn("mod_delayed_work_on", cpu, dw, d)
}

func (q *Workqueue) modDelayedOn(op string, cpu int, dw *DelayedWork, d time.Duration) bool {
	if q == nil {
		reportNilQueue(op)
		return false
	}
	if err := q.checkDelayed(cpu, dw); err != nil {
		return q.result(op, workOf(dw), err)
	}
	// The lifecycle and the other queue are checked before the grab,
	// which changes dw (admit.go).
	if err := q.checkOpen(admitNew); err != nil {
		return q.result(op, &dw.Work, err)
	}
	if dw.runsElsewhere(q) {
		q.reportError(op, dw.Func(), q.otherQueueErr(&dw.Work))
		return false // one instance at a time (instances.go)
	}
	// From the grab to the requeue, dw's instance is in transit to q:
	// counted as firing, so that Destroy's closeTimers, which comes
	// before its drain, waits for it. Once Destroy has closed the timers
	// only q's own items get here (checkOpen), and Destroy's drain waits
	// for the caller itself. The transit ends before any report: an
	// error handler may Destroy q, whose closeTimers would wait for it.
	transit := q.enterTransit()
	if !transit && !q.isChained() {
		return q.result(op, &dw.Work, errDestroying) // Destroy began after checkOpen
	}
	endTransit := func() {
		if transit {
			transit = false
			q.timerDone()
		}
	}
	// Deferred too, for a tracer that calls runtime.Goexit in queue_work.
	defer endTransit()
	r, from := dw.grabFrom(q)
	switch r {
	case grabHeld:
		return true
	case grabSelf:
		endTransit()
		q.reportError(op, dw.Func(), ErrDeadlock)
		return false
	case grabElsewhere:
		// Started on another queue since the check above (and maybe
		// pending again there): refused, and left as it is.
		endTransit()
		q.reportError(op, dw.Func(), q.otherQueueErr(&dw.Work))
		return false
	}
	was := r == grabPending
	k := admitNew
	if was {
		// The instance goes on, re-armed, outside every key (as grab
		// does for a chained one): if it was its key's active instance,
		// the key moves on now instead of waiting for the timer.
		dw.keyedDone(seqOf(dw.state.Load()), true)
		if from == q {
			k = admitBack // admitted on q before: not a new instance
		} else {
			// New for q, but gone from the queue it was pending on:
			// q's lifecycle was checked before the grab (admitMoved).
			k = admitMoved
		}
	}
	if dw.Disabled() {
		dw.markCancelled()
		dw.release()
		return was
	}
	err := dw.arm(q, cpu, d, k)
	endTransit()
	q.result(op, &dw.Work, err)
	return was
}
