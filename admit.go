package wq

import (
	"fmt"
)

// Admission: the one way into a queue. The lifecycle it checks is in
// lifecycle.go.
//
// Every entry that gives q a new or returning instance of an item passes
// the same checks, in the same order:
//
//  1. checkDestroyed: a destroyed queue refuses whatever the arguments
//     (ErrDestroyed), so that q.Go(nil) after Destroy says ErrDestroyed;
//  2. the function: a nil item, or one without a function, is ErrNoFunc
//     (the Go layer's calls name themselves in the error);
//  3. the arguments (a CPU or node that does not exist);
//  4. PENDING (pendOn, work.go): an item pending already is the kernel's
//     dedup (no error, no report), a disabled or held one is ErrDisabled;
//     one that runs on another queue is refused before PENDING is taken
//     (the lifecycle first, then ErrOtherQueue; instances.go);
//  5. admitPended, with PENDING owned: the lifecycle (checkOpen),
//     MaxPending (admit, backpressure.go). A refusal there releases
//     PENDING before it returns.
//
// The bool calls report a refusal through report, with their operation's
// name; the error calls return it and report nothing. Steps 1-3 change
// nothing; ModDelayed, whose grab changes the item, checks the lifecycle
// and the other queue before the grab, and its grab checks the other
// queue again where it takes the item (grabFrom).

// admitKind says what an entry brings to q.
type admitKind uint8

const (
	// admitNew: a new instance (Queue*, Go*, QueueKeyed*, QueueBatch,
	// QueueContext, QueueDelayed* and ModDelayed* of an idle item): every
	// check.
	admitNew admitKind = iota
	// admitArm: a new instance armed on a timer (QueueDelayed* and
	// ModDelayed* with a delay): every check but MaxPending, which counts
	// it when the timer queues it.
	admitArm
	// admitBack: an instance admitted before, coming back to be queued:
	// the timer fired, DelayedWork.Flush of the armed instance, a key's
	// next item, ModDelayed of an instance pending on q. Refused only by
	// a destroyed queue; never by MaxPending (counted, forced).
	admitBack
	// admitRearm: an instance admitted before, armed again (ModDelayed
	// with a delay of an instance pending on q): refused only by a
	// destroyed queue, and not counted by MaxPending while armed.
	admitRearm
	// admitMoved: a new instance for q that ModDelayed took off another
	// queue (or its timer there) after q's lifecycle check, made before
	// the grab, let it through: the lifecycle is not checked again (the
	// instance is already gone from the other queue; a drain or destroy
	// of q that began since waits for it, as for a Queue that passed its
	// check); MaxPending is, as for admitNew.
	admitMoved
	// admitMovedArm: admitMoved armed on a timer (ModDelayed with a
	// delay): as admitArm, without the lifecycle check.
	admitMovedArm
)

// checked reports whether the lifecycle of q was decided for an instance
// of kind k before it came to admitPended: it comes back, or ModDelayed
// checked it before its grab.
func (k admitKind) checked() bool { return k >= admitBack }

// armed reports whether k arms a timer: MaxPending counts the instance
// when the timer queues it.
func (k admitKind) armed() bool { return k == admitArm || k == admitRearm || k == admitMovedArm }

// errNilQueue is the refusal of a call on a nil *Workqueue.
var errNilQueue = fmt.Errorf("%w: nil *Workqueue", ErrInvalidArgument)

// The Go layer's nil functions: ErrNoFunc, naming the call.
var (
	errNoFuncGo        error = &refusal{"wq: Workqueue.Go: nil function", []error{ErrNoFunc}}
	errNoFuncGoContext error = &refusal{"wq: Workqueue.GoContext: nil function", []error{ErrNoFunc}}
	errNoFuncGroup     error = &refusal{"wq: Group.Go: nil function", []error{ErrNoFunc}}
	errNoFuncSubmit    error = &refusal{"wq: Submit: nil function", []error{ErrNoFunc}}
)

// reportNilQueue reports a bool or void call on a nil *Workqueue to the
// process-wide error handler.
func reportNilQueue(op string) { reportError(op, "", errNilQueue) }

// checkDestroyed is the first check of every entry: ErrDestroyed whatever
// the arguments.
func (q *Workqueue) checkDestroyed() error {
	if q.life.load().destroyed() {
		return ErrDestroyed
	}
	return nil
}

// checkOpen is the lifecycle check for an entry of kind k from the
// caller: nil when q accepts it now, else ErrDestroyed, errDestroying
// (matches ErrDestroyed and ErrDraining) or ErrDraining. Costs one atomic
// load on a live queue; a gettid and a map lookup (isChained) while it
// refuses.
func (q *Workqueue) checkOpen(k admitKind) error {
	s := q.life.load()
	if !s.refusing() {
		return nil
	}
	if s.destroyed() {
		return ErrDestroyed
	}
	if k.checked() || q.isChained() {
		return nil
	}
	if s.destroying() {
		return errDestroying
	}
	return ErrDraining
}

// admitPended is the admission of an instance of w whose PENDING the
// caller owns, in order: the lifecycle and MaxPending (not while armed).
// Another queue running w was checked where PENDING was taken (pendOn,
// grabFrom; instances.go). On a refusal it ends the instance (flush
// waiters released, PENDING released) and returns the reason, which the
// caller returns or reports; it reports nothing itself.
func (q *Workqueue) admitPended(w *Work, k admitKind) error {
	if err := q.checkOpen(k); err != nil {
		w.markCancelled()
		w.release()
		return err
	}
	if k.armed() {
		return nil // counted when the timer queues it
	}
	if err := q.admit(w, k == admitBack); err != nil { // MaxPending (backpressure.go)
		w.markCancelled()
		w.release()
		return err
	}
	return nil
}

// report reports a refusal of the queue path returned to a bool call,
// for operation op, to q's error handler: ErrDestroyed once per queue,
// ErrDraining once per drain, ErrQueueFull once until the count falls,
// others each time; a pending or disabled item not at all (the kernel's
// dedup). Called with no lock held, after w was released: a handler that
// panics or calls runtime.Goexit must not leave w pending.
func (q *Workqueue) report(op string, w *Work, err error) {
	switch err {
	case errPending, ErrDisabled:
	case ErrDestroyed:
		if q.reportOnce(lifeRepDestroy) {
			q.reportError(op, w.Func(), fmt.Errorf("%w: %s", ErrDestroyed, q.name))
		}
	case ErrDraining, errDestroying:
		if q.reportOnce(lifeRepDraining) {
			q.reportError(op, w.Func(), fmt.Errorf("%w: %s (reported once per drain; later refusals are not reported)", ErrDraining, q.name))
		}
	case ErrNoFunc:
		q.reportError(op, "", err)
	case ErrQueueFull:
		if q.bp.full.Load() || !q.bp.full.CompareAndSwap(false, true) {
			return
		}
		q.reportError(op, w.Func(), fmt.Errorf("%w: %s: max_active %d + MaxPending %d items held; reported once until one leaves", ErrQueueFull, q.name, q.maxActive.Load(), q.bp.max))
	default:
		q.reportError(op, w.Func(), err)
	}
}

// reportOnce sets report bit b and reports whether this call set it.
func (q *Workqueue) reportOnce(b lifeWord) bool {
	for {
		old := q.life.w.Load()
		if lifeWord(old)&b != 0 {
			return false
		}
		if q.life.w.CompareAndSwap(old, old|uint64(b)) {
			return true
		}
	}
}

// result turns the queue path's answer into the bool of the kernel-style
// calls: true when queued; false otherwise, with a refusal reported
// (report).
func (q *Workqueue) result(op string, w *Work, err error) bool {
	if err == nil {
		return true
	}
	q.report(op, w, err)
	return false
}
