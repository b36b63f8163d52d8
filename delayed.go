package wq

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/ilist"
	"github.com/gowq/wq/internal/timer"
)

// DelayedWork is a work item with a timer, as struct delayed_work is: it is
// queued when its delay expires. It embeds Work, so Pending, Busy, Cancel,
// CancelSync, Disable, DisableSync and Enable apply to it directly and also
// stop its timer. Usable after Init; must not be copied after first use.
type DelayedWork struct {
	Work

	timer   timer.Timer               // set up by Init; fires timerFn, on an RT timer thread for an RT queue
	wq      atomic.Pointer[Workqueue] // target of the latest arming
	cpu     atomic.Int32              // requested CPU of the latest arming, or cpuUnbound
	armedOn *Workqueue                // guarded by Work.mu: the queue whose armed list holds dw, nil when the timer is not armed

	tnode ilist.Node[DelayedWork] // guarded by armedOn.timerMu: link in the queue's armed list
}

// Init sets the function and resets the item. It mirrors INIT_DELAYED_WORK.
// The item must be idle (not pending, not running).
func (dw *DelayedWork) Init(fn func()) {
	dw.Work.Init(fn)
	dw.Work.dw = dw
	dw.timer.Init(dw.timerFn)
}

// NewDelayedWork returns an initialised DelayedWork that runs fn. Mirrors
// DECLARE_DELAYED_WORK.
func NewDelayedWork(fn func()) *DelayedWork {
	dw := &DelayedWork{}
	dw.Init(fn)
	return dw
}

// timerList is a queue's list of armed delayed items, so that Destroy can
// find and cancel them, and the queue's reference on the RT timer threads
// its RT-class items are armed on. guarded by Workqueue.timerMu.
type timerList struct {
	ilist.List[DelayedWork]
	// rt is the RT timer set of the queue's class priority, taken at the
	// first arming while the queue's class is RT and given back by
	// closeTimers (Destroy). A queue switched to another RT priority keeps
	// its set; one switched to a non-RT class arms Go timers from then on.
	rt *timer.RTSet
}

func (l *timerList) push(dw *DelayedWork)   { l.PushFront(&dw.tnode, dw) }
func (l *timerList) remove(dw *DelayedWork) { l.Remove(&dw.tnode) }

// stopTimer stops an armed timer. It returns true when it stopped it: the
// caller then owns the armed instance's PENDING. Lock order: Work.mu, then
// the queue's timerMu.
func (dw *DelayedWork) stopTimer() bool { q, _, _ := dw.stopTimerQ(nil, false, nil); return q != nil }

// stopTimerOn is stopTimer limited to an arming on q (nil: any queue).
func (dw *DelayedWork) stopTimerOn(q *Workqueue) bool {
	aq, _, _ := dw.stopTimerQ(q, false, nil)
	return aq != nil
}

// stopTimerQ is stopTimerOn returning the queue the timer was armed on
// (nil when it stopped nothing), and whether Destroy had closed its
// timers then. With transit, the instance is counted as firing on that
// queue (closeTimers waits for it) until the caller's fire. With to
// non-nil (ModDelayed to to), a timer is left armed if the item runs on
// a queue other than to (elsewhere), checked under Work.mu: an armed
// instance armed after an instance started has the runner in sight.
func (dw *DelayedWork) stopTimerQ(q *Workqueue, transit bool, to *Workqueue) (aq *Workqueue, closed, elsewhere bool) {
	if !dw.timer.Ready() {
		return nil, false, false
	}
	dw.mu.Lock()
	defer dw.mu.Unlock()
	aq = dw.armedOn
	if aq == nil || (q != nil && aq != q) {
		return nil, false, false
	}
	if to != nil && dw.runsElsewhere(to) {
		return nil, false, true
	}
	aq.timerMu.Lock()
	defer aq.timerMu.Unlock()
	if !dw.timer.Stop() {
		return nil, false, false // firing: timerFn owns it now
	}
	aq.armed.remove(dw)
	dw.armedOn = nil
	if transit {
		aq.firing++
	} else {
		aq.wakeTimerWaiterLocked()
	}
	return aq, aq.timersClosed, false
}

// timerFn runs on the Go timer's goroutine, or on the RT timer thread for
// an RT queue, when the delay expires, with PENDING still owned by the
// armed instance. Mirrors delayed_work_timer_fn.
func (dw *DelayedWork) timerFn() {
	dw.mu.Lock()
	q := dw.armedOn
	dw.armedOn = nil
	if q == nil {
		dw.mu.Unlock()
		return
	}
	q.timerMu.Lock()
	q.armed.remove(dw)
	closed := q.timersClosed
	q.firing++
	q.timerMu.Unlock()
	dw.mu.Unlock()
	dw.fire(q, closed)
}

// fire queues the armed instance taken off q's armed list and counted as
// firing (timerFn, DelayedWork.Flush), then ends the firing. The
// instance was admitted before any drain that began since: a draining
// queue accepts it (admitBack). If Destroy had closed the timers when it
// was taken off the list (closed), it is cancelled and reported with the
// other armed items; if not, closeTimers waits for it, and Destroy's
// drain runs it.
func (dw *DelayedWork) fire(q *Workqueue, closed bool) {
	// Deferred, so that a tracer that calls runtime.Goexit on this
	// goroutine (queue_work is traced here) cannot leave Destroy waiting.
	defer q.timerDone()
	if closed {
		q.noteTimerCancelled(dw)
		return
	}
	q.queuePendedFrom(int(dw.cpu.Load()), &dw.Work, admitBack)
}

// enterTransit counts an instance that a caller takes to q outside the
// timer (ModDelayed) as firing, so that closeTimers waits for it, and
// reports whether it did: false once Destroy has closed the timers. The
// caller ends it with timerDone.
func (q *Workqueue) enterTransit() bool {
	q.timerMu.Lock()
	defer q.timerMu.Unlock()
	if q.timersClosed {
		return false
	}
	q.firing++
	return true
}

// timerDone ends a timerFn: when no timer of q is armed or firing, a
// waiting closeTimers is released.
func (q *Workqueue) timerDone() {
	q.timerMu.Lock()
	q.firing--
	q.wakeTimerWaiterLocked()
	q.timerMu.Unlock()
}

// wakeTimerWaiterLocked releases closeTimers once nothing is armed or
// firing. Called with timerMu held.
func (q *Workqueue) wakeTimerWaiterLocked() {
	if q.firing == 0 && q.armed.Empty() && q.timerIdle != nil {
		close(q.timerIdle)
		q.timerIdle = nil
	}
}

// arm queues the pending item after d on q (cpu may be cpuUnbound), as
// an instance of kind k (admitNew; from ModDelayed, admitBack for one
// pending on q before, admitMoved for one taken off another queue).
// PENDING must be owned by the caller. It returns nil, or the refusal
// when q refused the item (admit.go, or arming closed by Destroy);
// PENDING is then released, and the caller reports the refusal once it
// holds nothing a handler could wait for (ModDelayed: its transit). An
// instance of kind admitBack or admitMoved whose arming Destroy closed is
// queued at once instead: it was admitted before the destroy. Mirrors
// __queue_delayed_work.
func (dw *DelayedWork) arm(q *Workqueue, cpu int, d time.Duration, k admitKind) error {
	if d <= 0 {
		return q.queuePendedErr(cpu, &dw.Work, k, nil)
	}
	ak := admitArm
	switch k {
	case admitBack:
		ak = admitRearm
	case admitMoved:
		ak = admitMovedArm
	}
	if err := q.admitPended(&dw.Work, ak); err != nil {
		return err
	}
	if cpu == cpuUnbound && !q.unbound {
		// A per-CPU queue keeps the locality of the queueing CPU, as a
		// timer armed on the local CPU does.
		cpu = currentCPU()
	}
	dw.mu.Lock()
	q.timerMu.Lock()
	if q.timersClosed {
		q.timerMu.Unlock()
		dw.mu.Unlock()
		if k == admitBack || k == admitMoved {
			// Admitted before the destroy began (ModDelayed, in transit:
			// Destroy's drain comes after it): queued at once.
			return q.queuePendedErr(cpu, &dw.Work, k, nil)
		}
		dw.markCancelled()
		dw.release()
		return errDestroying // arming closed by Destroy
	}
	dw.wq.Store(q)
	dw.cpu.Store(int32(cpu))
	dw.armedOn = q
	q.armed.push(dw)
	dw.timer.Reset(d, q.timerBaseLocked(cpu))
	q.timerMu.Unlock()
	dw.mu.Unlock()
	return nil
}

// Flush queues the item at once if its timer is armed and then waits like
// Work.Flush. It returns true if it waited. Mirrors flush_delayed_work().
func (dw *DelayedWork) Flush() bool {
	ok, _ := dw.FlushContext(context.Background())
	return ok
}

// FlushContext is Flush bounded by ctx; see Work.FlushContext. A nil ctx
// returns (false, an error matching ErrInvalidArgument) and queues
// nothing.
func (dw *DelayedWork) FlushContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, errNilContext
	}
	// Counted as firing (stopTimerQ with transit) until queued, as when
	// its timer fires: a Destroy that began meanwhile waits for it in
	// closeTimers, before its drain.
	q, closed, _ := dw.stopTimerQ(nil, true, nil)
	if q == nil {
		return dw.Work.FlushContext(ctx)
	}
	// We own the armed instance: register for it before queueing it, so
	// that an instance that runs at once still counts as waited for.
	dw.mu.Lock()
	ch := dw.waiterLocked(seqOf(dw.state.Load()))
	dw.mu.Unlock()
	// The armed instance was queued before any drain that began since,
	// as when its timer fires: a draining queue accepts it.
	dw.fire(q, closed)
	if ch == nil {
		return true, nil
	}
	if dw.selfRunning() {
		// From the item's own function: the queued instance runs after
		// this one, so waiting for it would deadlock.
		dw.dropWaiter(ch)
		reportError("flush_delayed_work", dw.Func(), ErrDeadlock)
		return false, ErrDeadlock
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		dw.dropWaiter(ch)
		return false, ctx.Err()
	}
}

// closeTimers stops arming on q (Destroy), cancels every item armed on it
// and waits until no timer of q is armed or firing: a timer that fired
// but whose timerFn has not run yet stays on the armed list until it has
// (and, finding the timers closed, cancels its item). It returns the names
// of the items cancelled, which are then idle. Called without locks.
func (q *Workqueue) closeTimers() []string {
	q.timerMu.Lock()
	q.timersClosed = true
	var armed []*DelayedWork
	for dw := q.armed.Front(); dw != nil; dw = dw.tnode.Next() {
		armed = append(armed, dw)
	}
	q.timerMu.Unlock()
	for _, dw := range armed {
		if dw.stopTimerOn(q) {
			q.noteTimerCancelled(dw)
		}
	}
	q.timerMu.Lock()
	for q.firing > 0 || !q.armed.Empty() {
		ch := make(chan struct{})
		q.timerIdle = ch
		q.timerMu.Unlock()
		<-ch
		q.timerMu.Lock()
	}
	names := q.timerCancelled
	q.timerCancelled = nil
	rt := q.armed.rt
	q.armed.rt = nil
	q.timerMu.Unlock()
	if rt != nil {
		// Nothing of q is armed or firing: the set's threads end here
		// unless another RT queue or kthread worker still holds it.
		rt.Release()
	}
	return names
}

// timerBaseLocked returns the RT timer base (thread) for an item armed on
// q for cpu when q's class is RT (SCHED_FIFO: the RT class, or HighPri
// switched to FIFO), else nil (a Go timer). The base is cpu's, or for
// cpuUnbound the calling CPU's, as the kernel arms a delayed item's timer
// on its CPU (add_timer_on) or on the local CPU (add_timer_global): a
// per-CPU item's worker is then woken on its own CPU. Normal and nice -20
// classes keep Go timers: their workers wait for a CPU like a Go timer's
// goroutine does (docs/design.md, "Delayed work"). Called with timerMu
// held; the first call for an RT queue takes the queue's reference on the
// set, and the first for a CPU starts its thread without waiting for it.
func (q *Workqueue) timerBaseLocked(cpu int) *timer.RT {
	t := q.table.Load()
	var pq *pwq
	switch {
	case cpu >= 0 && cpu < len(t.cpu):
		pq = t.cpu[cpu]
	case t.dfl != nil:
		pq = t.dfl
	case len(t.cpu) > 0:
		pq = t.cpu[0]
	}
	if pq == nil || !pq.pool.key.class.rt() {
		return nil
	}
	if q.armed.rt == nil {
		q.armed.rt = timer.AcquireRT(pq.pool.key.class.prio)
	}
	if cpu == cpuUnbound {
		cpu = -1
	}
	return q.armed.rt.On(cpu)
}

// noteTimerCancelled cancels an armed instance whose PENDING the caller
// owns (its timer stopped or fired after closeTimers) and records it for
// Destroy's report.
func (q *Workqueue) noteTimerCancelled(dw *DelayedWork) {
	dw.markCancelled()
	dw.release()
	q.timerMu.Lock()
	q.timerCancelled = append(q.timerCancelled, dw.Func())
	q.timerMu.Unlock()
}
