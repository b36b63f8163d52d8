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
// The check loads the item's runner and that worker's pwq (confirmed by
// a second load of the runner: runsElsewhere), made where an entry
// takes PENDING for a new instance, before it takes it: between the load
// of the state and its CAS (pendOn, work.go), or in ModDelayed's grab
// (grabFrom: before the CAS of an idle item, under the lock that holds a
// pending one); an idle item is refused only if its state did not change
// since the check. A running instance has its runner set before it cleared
// PENDING, so the check sees it; the CAS succeeds only if no one took
// PENDING since the state was loaded, so no instance started since; and
// once the caller owns PENDING, none can start anywhere else. A refusal
// therefore never holds PENDING: a Queue of the item elsewhere meanwhile
// (a running item requeuing itself) never finds it pending because of a
// call that then refuses it, which would lose the run it promises.

// runsElsewhere reports whether an instance of w is running now on a
// worker of a queue other than q. The runner's pwq counts only if the
// runner still runs w after it was read: a worker that ended w and took
// an item of another queue between the two loads would otherwise refuse
// an item that runs nowhere, or on q. The runner can be the same worker
// again only for a new instance, which took PENDING: callers that check
// an idle item compare its state after the check (pendOn, grabFrom).
func (w *Work) runsElsewhere(q *Workqueue) bool {
	for {
		r := w.runner.Load()
		if r == nil {
			return false
		}
		rp := r.curPwq.Load()
		if w.runner.Load() == r {
			return rp != nil && rp.wq != q
		}
	}
}

// refuseElsewhere is the refusal of a new instance of w on q while w runs
// on another queue, for pendOn, which takes nothing: q's lifecycle
// refusal if q refuses the caller now (admit.go's order puts it first),
// otherwise an error wrapping ErrOtherQueue, for the caller to return or
// report.
func (q *Workqueue) refuseElsewhere(w *Work) error {
	if err := q.checkOpen(admitNew); err != nil {
		return err
	}
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
