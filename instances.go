package wq

import "fmt"

// One instance at a time, on one queue.
//
// The kernel lets a work item be queued on a second workqueue while it
// still runs on the first: non-reentrance then holds per queue only, and
// cancel_work_sync and flush_work wait for the instance on the pool the
// item was last queued on, not for the other one. gowq refuses that second
// instance instead (ErrOtherQueue): a Work runs at most once at a time in
// the whole process, so that Busy, Flush, CancelSync and DisableSync, which
// follow the item's one running instance, are exact. The item may go to
// another queue once its instance has ended (a Flush first makes sure).
// kthread does the same for an item busy on another worker
// (ErrOtherWorker). docs/decisions.md gives the alternatives.
//
// The check is one atomic load of the item's runner where the item is
// queued (admitPended, admit.go; ModDelayed before its grab): the caller owns
// PENDING by then, so no instance can start anywhere else meanwhile, and
// a running instance has its runner set before it cleared PENDING.

// runsElsewhere reports whether an instance of w is running now on a
// worker of a queue other than q.
func (w *Work) runsElsewhere(q *Workqueue) bool {
	r := w.runner.Load()
	if r == nil {
		return false
	}
	rp := r.curPwq.Load()
	return rp != nil && rp.wq != q
}

// refuseElsewhere refuses an instance of w whose PENDING the caller owns
// when w runs now on another queue: it ends the instance (PENDING
// released, flush waiters of it released) and returns an error wrapping
// ErrOtherQueue, for the caller to return or report. Otherwise it returns
// nil and changes nothing.
func (q *Workqueue) refuseElsewhere(w *Work) error {
	if !w.runsElsewhere(q) {
		return nil
	}
	// Released before anyone reports: an error handler that panics or
	// calls runtime.Goexit must not leave w pending.
	w.markCancelled()
	w.release()
	return q.otherQueueErr(w)
}

// otherQueueErr is ErrOtherQueue for w, naming the queue it runs on.
func (q *Workqueue) otherQueueErr(w *Work) error {
	other := "another workqueue"
	if r := w.runner.Load(); r != nil {
		if rp := r.curPwq.Load(); rp != nil {
			other = rp.wq.name
		}
	}
	return fmt.Errorf("%w: queueing on %s while it runs on %s (flush it first)", ErrOtherQueue, q.name, other)
}
