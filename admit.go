package wq

import (
	"fmt"
	"sync/atomic"
)

// Admission: the one way into a queue, and the queue's lifecycle.
//
// Every entry that gives q a new or returning instance of an item passes
// the same checks, in the same order:
//
//  1. checkDestroyed: a destroyed queue refuses whatever the arguments
//     (ErrDestroyed), so that q.Go(nil) after Destroy says ErrDestroyed;
//  2. the function: a nil item, or one without a function, is ErrNoFunc
//     (the Go layer's calls name themselves in the error);
//  3. the arguments (a CPU or node that does not exist);
//  4. PENDING: an item pending already is the kernel's dedup (no error,
//     no report), a disabled or held one is ErrDisabled;
//  5. admitPended, with PENDING owned: the lifecycle (checkOpen), another
//     queue running the item (ErrOtherQueue), MaxPending (admit,
//     backpressure.go). A refusal there releases PENDING before it
//     returns.
//
// The bool calls report a refusal through report, with their operation's
// name; the error calls return it and report nothing. Steps 1-3 change
// nothing; ModDelayed, whose grab changes the item, also checks the
// lifecycle and the other queue before the grab.
//
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
	// check), the other queue and MaxPending are, as for admitNew.
	admitMoved
	// admitMovedArm: admitMoved armed on a timer (ModDelayed with a
	// delay): as admitArm, without the lifecycle check.
	admitMovedArm
)

// checked reports whether the lifecycle of q was decided for an instance
// of kind k before it came to admitPended: it comes back, or ModDelayed
// checked it before its grab.
func (k admitKind) checked() bool { return k >= admitBack }

// isNew reports whether k brings q a new instance: another queue running
// the item refuses it.
func (k admitKind) isNew() bool {
	return k == admitNew || k == admitArm || k == admitMoved || k == admitMovedArm
}

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
// caller owns, in order: the lifecycle, another queue running w (new
// instances), and MaxPending (not while armed). On a refusal it ends the
// instance (flush
// waiters released, PENDING released) and returns the reason, which the
// caller returns or reports; it reports nothing itself.
func (q *Workqueue) admitPended(w *Work, k admitKind) error {
	if err := q.checkOpen(k); err != nil {
		w.markCancelled()
		w.release()
		return err
	}
	if k.isNew() {
		if err := q.refuseElsewhere(w); err != nil {
			return err // released by refuseElsewhere (instances.go)
		}
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
