package wq

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gowq/wq/internal/funcname"
	"github.com/gowq/wq/internal/ilist"
)

// Work is a work item: a function to run later on a worker thread. It is
// meant to be embedded in the caller's own struct, as struct work_struct is
// in the kernel, and is usable after Init (the zero value has no function
// and cannot be queued). A Work must not be copied after first use.
//
// Guarantee (non-reentrance): a Work never runs concurrently with itself as
// long as it is always queued on the same Workqueue; queueing it while it
// runs makes it run once more afterwards, on the same pool.
type Work struct {
	fn   func()
	name funcname.Cache // function name for events, computed at first use

	// state packs PENDING, CANCELING, the disable count and the instance
	// sequence number; see the st* constants. atomic.
	state atomic.Uint64
	// pwq is the pool workqueue whose list (worklist or inactive) holds the
	// item; nil when on no list. Written under pwq.pool.mu, read lock-free
	// by grab. atomic.
	pwq atomic.Pointer[pwq]
	// runner is the worker executing the item, nil when not running. Set
	// before PENDING is cleared so that Queue can find it (non-reentrance).
	// atomic.
	runner atomic.Pointer[worker]
	// transit identifies the goroutine that holds the item in transit
	// while it runs the tracer's queue_work callback (its goroutine id; the
	// negated tid where goroutine ids cannot be read), 0 otherwise; grab
	// returns grabSelf to it instead of waiting for itself, on whichever
	// thread the tracer moved it to. atomic.
	transit atomic.Int64

	// Per-key ordering (keyed.go). kst is the key state of the item's keyed
	// instances in flight (chained or active), nil when it has none. Set and
	// cleared under kst.sh.mu, read lock-free by grab and by the completion
	// hook, which re-check it under the lock. atomic.
	// (kchained, kcolor and oneShot share a word.)
	kchained bool  // guarded by kst.sh.mu: an instance waits in the chain
	kcolor   uint8 // guarded by kst.sh.mu: the chained instance's flush color
	// oneShot: the Work of a goItem (goapi.go), back on the free list
	// after each run. Immutable.
	oneShot bool
	kst     atomic.Pointer[keyState]
	knode   ilist.Node[Work] // guarded by kst.sh.mu: link in the key's chain
	kseq    uint64           // guarded by kst.sh.mu: the chained instance's seq

	// pendQ is the queue with MaxPending whose bound counts the pending
	// instance (backpressure.go), nil otherwise. Owned by whoever owns
	// PENDING: set by admit; cleared by takePend when a worker starts the
	// instance (the worker holds the count until the function returns,
	// worker.bpQ), by unpend when it is unlinked or released.
	pendQ *Workqueue

	// List links. guarded by the pool lock of the list's pool. The list
	// it is on (node.List()): pool.worklist, pwq.inactive or a worker's
	// scheduled list.
	node     ilist.Node[Work]
	color    uint8 // flush color of the pwq at insertion
	queuedAt int64 // ns, monotonic, when inserted (for latency stats)
	activeAt int64 // ns, monotonic, when put on the worklist (escape_after); guarded by the pool lock
	// Stage stamps (stages.go), only while a recorder is set: written by
	// the owner of PENDING before the item is linked, taken and cleared by
	// its worker under the pool lock before PENDING is cleared.
	stQueue, stLocked int64

	// Lock-free queueing (incoming.go). inPwq is the pwq a queuer pushed
	// the item for, until a drain links it there (then pwq is set) or
	// reroutes it; grab takes that pool's lock to have it drained. inNext
	// and inCPU are written by the queuer before the push and read by the
	// drainer after it.
	inPwq  atomic.Pointer[pwq]
	inNext *Work
	// bounced is 1 + the instance seq of a pushed item that a drain found
	// for a dead pwq, and handed back to its queuer; 0 otherwise.
	bounced atomic.Uint64

	mu         sync.Mutex    // guards the fields below
	cancelers  int           // guarded by mu: CancelSync/DisableSync calls holding the item (CANCELING)
	running    int           // guarded by mu: workers executing it now
	runSeq     uint64        // guarded by mu: instance seq of the latest run
	doneSeq    uint64        // guarded by mu: every instance <= doneSeq finished or was cancelled
	cancelUpTo uint64        // guarded by mu: cancelled instances, effective when the running one ends
	waiters    []flushWaiter // guarded by mu
	dw         *DelayedWork  // immutable after Init: the DelayedWork that embeds this Work
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

// State word layout. PENDING and CANCELING never coexist: PENDING is owned
// by whoever set it (a queuer, a timer, a grabber); CANCELING means one or
// more sync cancellers hold the idle item, and is set and cleared under mu
// together with cancelers.
const (
	stPending      = 1 << 0
	stCanceling    = 1 << 1
	stDisableShift = 2
	stDisableMask  = 0xffff << stDisableShift
	stSeqShift     = 18
	stSeqOne       = 1 << stSeqShift
)

func seqOf(st uint64) uint64 { return st >> stSeqShift }

// Init sets the function the item runs and resets the item to idle. It
// mirrors INIT_WORK. Calling Init on a pending or running item is a bug (as
// in the kernel): the item must be idle.
func (w *Work) Init(fn func()) {
	w.fn = fn
	w.name.Reset()
}

// NewWork returns an initialised Work that runs fn. It mirrors
// DECLARE_WORK / INIT_WORK on a fresh struct.
func NewWork(fn func()) *Work {
	w := &Work{}
	w.Init(fn)
	return w
}

// Func returns the item's function name as the kernel's %ps would print
// it (e.g. "main.handle"), "" when not initialised.
func (w *Work) Func() string {
	if w == nil {
		return ""
	}
	if n, ok := w.name.Get(); ok {
		return n
	}
	if w.fn == nil {
		return ""
	}
	if w.oneShot {
		return w.name.Of(goItemOf(w).userFunc()) // the caller's closure, not goItem.run
	}
	return w.name.Of(w.fn)
}

// addr is the item's identity in events and dumps.
func (w *Work) addr() uintptr { return uintptr(unsafe.Pointer(w)) }

// pendFast is pendOn's common cases, small enough to be inlined into the
// queue path (queueOnErr): errPending for an item already pending, nil
// when it took PENDING of an idle item that runs nowhere (the exact
// check of pendOn, with the runner nil), and errPendSlow otherwise (a
// disabled or held item, one running, a CAS lost): the caller then
// calls pendOn.
func (w *Work) pendFast() error {
	old := w.state.Load()
	if old&stPending != 0 {
		return errPending
	}
	if old&(stCanceling|stDisableMask) == 0 && w.runner.Load() == nil && w.state.CompareAndSwap(old, (old|stPending)+stSeqOne) {
		return nil
	}
	return errPendSlow
}

// errPendSlow is pendFast's answer when pendOn must decide.
var errPendSlow = errors.New("wq: pendOn decides")

// pendOn sets PENDING for a new instance of w on q, as the
// test_and_set_bit(WORK_STRUCT_PENDING_BIT) of queue_work_on does. It
// returns nil when the caller now owns PENDING, errPending when w was
// pending (the kernel's dedup), ErrDisabled when it is disabled or held
// by a sync canceller, and, while w runs on a queue other than q, the
// refusal of refuseElsewhere (instances.go), with nothing taken.
//
// The other queue is checked between the load of the state and its CAS,
// so that a refusal never holds PENDING: a Queue of w elsewhere meanwhile
// (a running item requeuing itself) would find w pending, return false,
// and lose its run when the refusal released it. The CAS succeeds only
// if no one took PENDING since the load (every take bumps the sequence),
// so no instance can have started since the check: it is exact.
func (w *Work) pendOn(q *Workqueue) error {
	for {
		old := w.state.Load()
		if old&(stPending|stCanceling|stDisableMask) != 0 {
			if old&stPending != 0 {
				return errPending
			}
			return ErrDisabled
		}
		if w.runsElsewhere(q) {
			if w.state.Load() != old {
				continue // taken since: the runner seen may run a newer instance
			}
			return q.refuseElsewhere(w)
		}
		if w.state.CompareAndSwap(old, (old|stPending)+stSeqOne) {
			return nil
		}
	}
}

// Pending reports whether the item is pending: queued, armed as a timer, or
// held by a cancel in progress. Mirrors work_pending(). Never blocks.
func (w *Work) Pending() bool { return w.state.Load()&stPending != 0 }

// Busy reports BusyPending when the item is pending and BusyRunning when a
// worker executes it now. The answer may be stale when it returns; use it
// for diagnostics only, as work_busy() is. Never blocks.
func (w *Work) Busy() BusyFlags {
	var b BusyFlags
	if w.Pending() {
		b |= BusyPending
	}
	if w.runner.Load() != nil {
		b |= BusyRunning
	}
	return b
}

// grabResult is what grab found.
type grabResult uint8

const (
	grabIdle      grabResult = iota // the item was idle; the caller now owns PENDING
	grabPending                     // the item was queued or armed; the caller now owns PENDING
	grabHeld                        // a sync canceller holds the item; nothing is owned
	grabSelf                        // the caller's own worker is starting this item; nothing is owned
	grabElsewhere                   // pending while it runs on another queue than the caller's (grabFrom's to); nothing is owned
)

// grab takes ownership of PENDING, removing the item from its list or
// stopping its timer (try_to_grab_pending). It never waits for a thread
// that may be waiting for the caller:
//   - while a CancelSync or DisableSync holds the item (CANCELING), it
//     returns grabHeld at once, as the kernel's grabbers do for a disabled
//     item since 6.10;
//   - it waits only for an item in transit between being marked pending
//     and being linked or armed, which takes a few instructions on a
//     thread that waits for nobody (a queuer, a timer, or a worker about
//     to start the item); when that worker is the caller itself (a tracer
//     callback between dequeue and start), it returns grabSelf.
func (w *Work) grab() grabResult {
	r, _ := w.grabFrom(nil)
	return r
}

// grabFrom is grab that also returns, for grabPending, the queue the
// instance was pending on: armed on, chained under one of its keys, or
// on one of its pwqs. With to non-nil (ModDelayed to to), nothing is
// taken while w runs on a queue other than to (grabElsewhere;
// instances.go): a pending instance is left where it is, checked under
// the lock that holds it, and an idle item is left idle, checked before
// the CAS that would take it (as pendOn does). The caller's own check,
// made before, cannot see an instance that started since, and once the
// grab owns PENDING none can start.
func (w *Work) grabFrom(to *Workqueue) (grabResult, *Workqueue) {
	for spins := 0; ; spins++ {
		old := w.state.Load()
		if old&stCanceling != 0 {
			return grabHeld, nil
		}
		if old&stPending == 0 {
			if to != nil && w.runsElsewhere(to) {
				if w.state.Load() != old {
					continue // taken since, as in pendOn
				}
				return grabElsewhere, nil // checked before the CAS, as pendOn does
			}
			if w.state.CompareAndSwap(old, (old|stPending)+stSeqOne) {
				return grabIdle, nil
			}
			continue
		}
		if dw := w.dw; dw != nil {
			q, _, elsewhere := dw.stopTimerQ(nil, false, to)
			if q != nil {
				return grabPending, q
			}
			if elsewhere {
				return grabElsewhere, nil
			}
		}
		if ks := w.kst.Load(); ks != nil {
			if ok, elsewhere := ks.grabChained(w, to); ok {
				return grabPending, ks.sh.q
			} else if elsewhere {
				return grabElsewhere, nil
			}
		}
		if pq := w.pwq.Load(); pq != nil {
			if ok, elsewhere := w.grabFromPwq(pq, to); ok {
				return grabPending, pq.wq
			} else if elsewhere {
				return grabElsewhere, nil
			}
		}
		if ip := w.inPwq.Load(); ip != nil {
			// Pushed lock-free (incoming.go): the pool lock drains it
			// onto its pwq, where the next look finds it.
			ip.pool.mu.Lock()
			ip.pool.mu.Unlock()
			if w.pwq.Load() != nil {
				continue
			}
		}
		if w.selfStarting() {
			return grabSelf, nil
		}
		backoff(spins)
	}
}

// grabFromPwq unlinks w from pq's lists if it is still there, taking over
// its PENDING, unless, with to non-nil, w runs on a queue other than to
// (elsewhere: left on the list). Unlinking frees a max_active slot, and
// activating what waits traces activate_work: if a tracer calls
// runtime.Goexit there, the deferred release leaves w idle (cancelled)
// instead of pending forever.
func (w *Work) grabFromPwq(pq *pwq, to *Workqueue) (ok, elsewhere bool) {
	owned := false
	defer func() {
		if owned && !ok {
			w.markCancelled()
			w.release()
		}
	}()
	p := pq.pool
	p.mu.Lock()
	if w.pwq.Load() != pq {
		p.mu.Unlock()
		return false, false
	}
	if to != nil && w.runsElsewhere(to) {
		p.mu.Unlock()
		return false, true
	}
	owned = true
	bounded := pq.wq.bp.max > 0
	scan := pq.unlink(w)
	p.mu.Unlock()
	if bounded {
		pq.wq.wakeRoom()
	}
	if scan {
		pq.lim.scan(pq)
	}
	return true, false
}

func backoff(spins int) {
	switch {
	case spins < 16:
		runtime.Gosched()
	case spins < 64:
		time.Sleep(10 * time.Microsecond)
	default:
		time.Sleep(time.Millisecond)
	}
}

// markCancelled records that the instance owned by a grab will never run
// and releases the flush waiters it satisfies. Called with PENDING owned.
func (w *Work) markCancelled() {
	s := seqOf(w.state.Load())
	done := false
	exact := false
	w.mu.Lock()
	if w.running > 0 && w.runSeq < s {
		if s > w.cancelUpTo {
			w.cancelUpTo = s
		}
	} else if s > w.doneSeq {
		w.doneSeq = s
		done = true
		// With an instance running (a later one: runSeq >= s), only s is
		// known done: an earlier keyed instance may run on another pool.
		exact = w.running > 0
		w.wakeWaitersLocked()
	}
	w.mu.Unlock()
	if done {
		w.keyedDone(s, exact)
	}
}

// release clears PENDING after a grab or a refusal; an instance still
// counted by its queue's MaxPending leaves the count.
func (w *Work) release() {
	w.unpendWake()
	w.state.And(^uint64(stPending))
}

// hold turns the PENDING that the caller owns into CANCELING, in one step:
// the item is then idle (cancelled) but refuses every queue attempt until
// unhold (the kernel's cancel_work_sync disables the item for the wait).
func (w *Work) hold() {
	w.mu.Lock()
	w.cancelers++
	for {
		old := w.state.Load()
		if w.state.CompareAndSwap(old, (old&^stPending)|stCanceling) {
			break
		}
	}
	w.mu.Unlock()
}

// join adds the caller to the cancellers that hold the item. It returns
// false when the holders have all left meanwhile (grab again).
func (w *Work) join() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.state.Load()&stCanceling == 0 {
		return false
	}
	w.cancelers++
	return true
}

// unhold ends a hold or join; the last canceller clears CANCELING.
func (w *Work) unhold() {
	w.mu.Lock()
	w.cancelers--
	if w.cancelers == 0 {
		w.state.And(^uint64(stCanceling))
	}
	w.mu.Unlock()
}

// startRun marks the item running for the instance that is pending and
// clears PENDING, after which the item may be queued again. Called by the
// worker that popped it, with runner already set.
func (w *Work) startRun() uint64 {
	w.mu.Lock()
	w.running++
	s := seqOf(w.state.Load())
	w.runSeq = s
	w.mu.Unlock()
	w.state.And(^uint64(stPending))
	return s
}

// finishRun marks instance s finished and releases flush waiters.
func (w *Work) finishRun(wk *worker, s uint64) {
	w.mu.Lock()
	w.running--
	d := s
	if w.cancelUpTo > d {
		d = w.cancelUpTo
	}
	if d > w.doneSeq {
		w.doneSeq = d
	}
	// Clear runner before releasing waiters: a CancelSync or DisableSync
	// that returns must see the item not running (Busy).
	w.runner.CompareAndSwap(wk, nil)
	if len(w.waiters) > 0 {
		w.wakeWaitersLocked()
	}
	// Every instance up to doneSeq is done only when none runs; while
	// another instance of w runs (on another pool: a plain instance, say,
	// beside a keyed one), only s is, and the key's next item must wait
	// for its own instance.
	d, exact := w.doneSeq, w.running > 0
	if exact {
		d = s
	}
	w.mu.Unlock()
	w.keyedDone(d, exact)
}

func (w *Work) wakeWaitersLocked() {
	k := 0
	for _, fw := range w.waiters {
		if fw.target <= w.doneSeq {
			close(fw.ch)
		} else {
			w.waiters[k] = fw
			k++
		}
	}
	clear(w.waiters[k:])
	w.waiters = w.waiters[:k]
}

// selfStarting reports whether the caller is the goroutine that must go
// on for w's pending instance to run: the worker that dequeued it and has
// not started it (the tracer's execute_start, the stage recorder), or the
// queuer in whose tracer's queue_work it is in transit, not yet linked.
// Waiting for that instance there would wait forever (grab's grabSelf,
// flushTarget's ErrDeadlock).
func (w *Work) selfStarting() bool {
	if r := w.runner.Load(); r != nil && r.onSelf() && r.starting == w {
		return true
	}
	t := w.transit.Load()
	return t != 0 && t == transitSelf()
}

// selfRunning reports whether the calling thread is the worker executing w
// (exact: a worker's tid is recorded only while its thread lives).
func (w *Work) selfRunning() bool {
	r := w.runner.Load()
	return r != nil && r.onSelf()
}

// waitFor registers a waiter for instance target and returns its channel,
// or nil when target is already done. Called with w.mu held.
func (w *Work) waiterLocked(target uint64) chan struct{} {
	if target <= w.doneSeq {
		return nil
	}
	ch := make(chan struct{})
	w.waiters = append(w.waiters, flushWaiter{target: target, ch: ch})
	return ch
}

func (w *Work) dropWaiter(ch chan struct{}) {
	w.mu.Lock()
	for i, fw := range w.waiters {
		if fw.ch == ch {
			w.waiters = append(w.waiters[:i], w.waiters[i+1:]...)
			break
		}
	}
	w.mu.Unlock()
}

// flushTarget returns the channel to wait on for the item's last queueing
// instance, or nil when there is nothing to wait for.
func (w *Work) flushTarget() (chan struct{}, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.state.Load()
	var target uint64
	switch {
	case st&stPending != 0 && st&stCanceling == 0:
		if w.selfStarting() {
			return nil, ErrDeadlock
		}
		target = seqOf(st)
	case w.running > 0:
		target = w.runSeq
	default:
		return nil, nil
	}
	if w.running > 0 && w.runSeq <= target && w.selfRunning() {
		return nil, ErrDeadlock
	}
	return w.waiterLocked(target), nil
}

// Flush waits until the item's last queueing instance has finished
// executing. It returns true if it waited, false if the item was idle. It
// blocks for as long as that takes; see FlushContext to bound the wait.
// Flushing an item from inside its own function would wait forever: it
// returns false at once and reports ErrDeadlock to the error handler; so
// does flushing it from the tracer's queue_work or execute_start of the
// instance it would wait for, or from the stage recorder before it, on
// the goroutine that must go on for that instance to run. As in
// the kernel, flushing from an item of an ordered queue (or one with
// max_active 1) an item queued after it on the same queue is a deadlock
// that is not detected. Mirrors flush_work().
func (w *Work) Flush() bool {
	ok, _ := w.FlushContext(context.Background())
	return ok
}

// FlushContext is Flush bounded by ctx. It returns (true, nil) after
// waiting, (false, nil) when idle, and (false, ctx.Err()) when ctx ends
// first (the item keeps its state), or ErrDeadlock (see Flush); a nil
// ctx returns (false, an error matching ErrInvalidArgument).
func (w *Work) FlushContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, errNilContext
	}
	ch, err := w.flushTarget()
	if err != nil {
		reportError("flush_work", w.Func(), err)
		return false, err
	}
	if ch == nil {
		return false, nil
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		w.dropWaiter(ch)
		return false, ctx.Err()
	}
}

// Cancel removes the item from its queue (or stops its timer) if it is
// pending, without waiting for a running instance. It returns true if the
// item was pending, false if it was idle or a CancelSync/DisableSync holds
// it. Mirrors cancel_work(); never blocks except for the few instructions
// an item spends between being marked pending and linked.
func (w *Work) Cancel() bool {
	switch r := w.grab(); r {
	case grabHeld, grabSelf:
		return false
	default:
		w.markCancelled()
		w.release()
		return r == grabPending
	}
}

// CancelSync cancels the item like Cancel and then waits for a running
// instance to finish. While it waits, the item is held: Queue and
// QueueDelayed of it return false, ModDelayed returns true without
// queueing, Cancel returns false, and a concurrent CancelSync waits too and
// returns false. It returns true if the item was pending. Called from
// inside the item's own function it does not wait (that would deadlock)
// and reports ErrDeadlock; the item is still cancelled. Mirrors
// cancel_work_sync().
func (w *Work) CancelSync() bool { return w.cancelSync("cancel_work_sync", false) }

func (w *Work) cancelSync(op string, disable bool) bool {
	for {
		r := w.grab()
		switch r {
		case grabHeld:
			if !w.join() {
				continue
			}
			if disable {
				w.incDisable()
			}
			dl := w.waitRunning()
			w.unhold()
			if dl {
				reportError(op, w.Func(), ErrDeadlock) // after unhold: the handler may Goexit
			}
			return false
		case grabSelf:
			if disable {
				w.incDisable()
			}
			reportError(op, w.Func(), ErrDeadlock)
			return false
		}
		if disable {
			w.incDisable()
		}
		w.markCancelled()
		w.hold()
		dl := w.waitRunning()
		w.unhold()
		if dl {
			reportError(op, w.Func(), ErrDeadlock) // after unhold: the handler may Goexit
		}
		return r == grabPending
	}
}

// waitRunning waits until no instance of the item runs; from inside the
// item itself it returns true at once instead (the caller reports
// ErrDeadlock once it no longer holds the item). Called while holding the
// item, so no new instance can start.
func (w *Work) waitRunning() (deadlock bool) {
	return w.waitRunningContext(context.Background()) == ErrDeadlock
}

// CancelSyncContext is CancelSync bounded by ctx: it cancels the item like
// Cancel, then waits for a running instance to finish, holding the item
// as CancelSync does, until ctx ends. It returns (true, nil) if the item
// was pending and no instance runs any more, (false, nil) if it was idle;
// when ctx ends first, the pending instance (if any) is cancelled all the
// same, the hold is dropped, the running instance goes on, and it returns
// (wasPending, ctx.Err()). Called from inside the item's own function it
// does not wait and returns ErrDeadlock (also reported, as CancelSync
// does); the item is still cancelled. A ctx already done cancels without
// waiting. A nil ctx returns (false, an error matching ErrInvalidArgument)
// and cancels nothing. A gowq extension of cancel_work_sync().
func (w *Work) CancelSyncContext(ctx context.Context) (bool, error) {
	if ctx == nil {
		return false, errNilContext
	}
	for {
		r := w.grab()
		switch r {
		case grabHeld:
			if !w.join() {
				continue
			}
			err := w.waitRunningContext(ctx)
			w.unhold()
			if err == ErrDeadlock {
				reportError("cancel_work_sync", w.Func(), err) // after unhold: the handler may Goexit
			}
			return false, err
		case grabSelf:
			reportError("cancel_work_sync", w.Func(), ErrDeadlock)
			return false, ErrDeadlock
		}
		w.markCancelled()
		w.hold()
		err := w.waitRunningContext(ctx)
		w.unhold()
		if err == ErrDeadlock {
			reportError("cancel_work_sync", w.Func(), err)
		}
		return r == grabPending, err
	}
}

// waitRunningContext is waitRunning bounded by ctx: nil once no instance
// runs, ErrDeadlock from inside the item, ctx.Err() when ctx ends first.
func (w *Work) waitRunningContext(ctx context.Context) error {
	w.mu.Lock()
	if w.running == 0 {
		w.mu.Unlock()
		return nil
	}
	if w.selfRunning() {
		w.mu.Unlock()
		return ErrDeadlock
	}
	ch := w.waiterLocked(w.runSeq)
	w.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		w.dropWaiter(ch)
		return ctx.Err()
	}
}

// Disable increments the item's disable count and cancels it like Cancel.
// While the count is above zero, queueing the item returns false. It
// returns true if the item was pending. The count saturates at 65535 (a
// further Disable reports ErrInvalidArgument and leaves it). Mirrors
// disable_work().
func (w *Work) Disable() bool {
	r := w.grab()
	w.incDisable()
	if r == grabHeld || r == grabSelf {
		return false
	}
	w.markCancelled()
	w.release()
	return r == grabPending
}

// DisableSync is Disable followed by waiting for a running instance, like
// CancelSync (and holding the item the same way while it waits). Mirrors
// disable_work_sync().
func (w *Work) DisableSync() bool { return w.cancelSync("disable_work_sync", true) }

func (w *Work) incDisable() {
	for {
		old := w.state.Load()
		if old&stDisableMask == stDisableMask {
			reportError("disable_work", w.Func(), ErrInvalidArgument)
			return
		}
		if w.state.CompareAndSwap(old, old+(1<<stDisableShift)) {
			return
		}
	}
}

// Enable decrements the disable count and returns true when it reaches
// zero, that is, when the item can be queued again. Enabling an item that
// is not disabled reports ErrInvalidArgument and returns true. Mirrors
// enable_work(). Never blocks.
func (w *Work) Enable() bool {
	for {
		old := w.state.Load()
		if old&stDisableMask == 0 {
			reportError("enable_work", w.Func(), ErrInvalidArgument)
			return true
		}
		nw := old - (1 << stDisableShift)
		if w.state.CompareAndSwap(old, nw) {
			return nw&stDisableMask == 0
		}
	}
}

// Disabled reports whether the disable count is above zero.
func (w *Work) Disabled() bool { return w.state.Load()&stDisableMask != 0 }

// workList is an intrusive doubly-linked list of work items
// (internal/ilist); it never allocates. guarded by the owning pool's mu.
// The methods keep the names the pool code uses.
type workList ilist.List[Work]

func (l *workList) il() *ilist.List[Work] { return (*ilist.List[Work])(l) }

func (l *workList) empty() bool       { return l.il().Empty() }
func (l *workList) len() int          { return l.il().Len() }
func (l *workList) head() *Work       { return l.il().Front() }
func (l *workList) pushBack(w *Work)  { l.il().PushBack(&w.node, w) }
func (l *workList) pushFront(w *Work) { l.il().PushFront(&w.node, w) }
func (l *workList) remove(w *Work)    { l.il().Remove(&w.node) }
func (l *workList) popFront() *Work   { return l.il().PopFront() }
func (w *Work) list() *workList       { return (*workList)(w.node.List()) }
func (w *Work) next() *Work           { return w.node.Next() }
