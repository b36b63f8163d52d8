package kthread

import (
	"sync/atomic"

	"github.com/gowq/wq/internal/funcname"
	"github.com/gowq/wq/internal/ilist"
	"github.com/gowq/wq/internal/timer"
)

// Work is a work item for a kthread Worker: a function to run later on the
// worker's thread. It mirrors struct kthread_work and is meant to be
// embedded in the caller's own struct. It is usable after Init (or
// NewWork); the zero value has no function and queueing it fails with
// ErrNoFunc. A Work must not be copied after first use.
//
// A Work is attached to one worker at a time (the kernel's work->worker):
// the first queue attaches it, and it may move to another worker only while
// it is idle (neither pending, nor running, nor being cancelled). Queueing
// it on a second worker while it is busy on the first returns false and
// reports ErrOtherWorker, where the kernel would WARN.
//
// A plain Work carries nothing of wq: the state a PerCPU set's fallback
// workqueue needs (a wq.Work, see Fallback) is allocated the first time
// the item goes to a fallback, and reused afterwards.
type Work struct {
	fn   func()
	name funcname.Cache // function name, computed at first use

	// owner is the worker the item is attached to (work->worker), nil
	// before the first queue. It changes only while the item is idle, with
	// the old owner's mu held. Every field below marked "guarded by
	// owner.mu" is guarded by the mu of the worker owner points to, which
	// the reader must lock and then recheck owner. atomic.
	owner atomic.Pointer[Worker]

	// node links the item on the list holding it (worklist or delayed;
	// list() names it, nil if none: "pending"). guarded by owner.mu.
	node      ilist.Node[Work]
	canceling int // guarded by owner.mu: cancel_*_sync calls waiting for the running instance
	barrier   chan struct{}

	dw *DelayedWork // immutable after Init: the DelayedWork embedding this Work, or nil

	// fb is the item as the fallback workqueue of a PerCPU set sees it,
	// nil until the item first goes to a fallback (percpu.go). Set under
	// the fallback owner's mu and never cleared; its state is guarded by
	// wq.
	fb fallbackWork
}

// Init sets the function the item runs. It mirrors kthread_init_work().
// The item must be idle (not pending, not running); Init on a busy item is
// a bug, as in the kernel. Init does not allocate.
func (w *Work) Init(fn func()) {
	w.fn = fn
	w.name.Reset()
	if w.fb != nil {
		w.fb.Init(fn)
	}
}

// NewWork returns an initialised Work that runs fn. It mirrors
// DEFINE_KTHREAD_WORK / kthread_init_work() on a fresh struct.
func NewWork(fn func()) *Work {
	w := &Work{}
	w.Init(fn)
	return w
}

// Func returns the item's function name as the kernel's %ps would print it
// (for example "main.decompress"), "" when not initialised.
func (w *Work) Func() string {
	if w == nil || w.fn == nil {
		return ""
	}
	return w.name.Of(w.fn)
}

// Pending reports whether the item is queued, armed as a delayed timer, or
// queued on a PerCPU set's fallback workqueue. The answer may be stale when
// it returns; use it for diagnostics. It briefly takes the owner's lock.
func (w *Work) Pending() bool {
	o := w.lockOwner()
	if o == nil {
		return false
	}
	defer o.mu.Unlock()
	if o.fallback != nil {
		return o.fallback.pending(w)
	}
	return w.list() != nil
}

// lockOwner locks the item's current owner and returns it, or returns nil
// (nothing locked) when the item was never queued.
func (w *Work) lockOwner() *Worker {
	for {
		o := w.owner.Load()
		if o == nil {
			return nil
		}
		o.mu.Lock()
		if w.owner.Load() == o {
			return o
		}
		o.mu.Unlock()
	}
}

// DelayedWork is a work item with a timer: it is queued on its worker when
// its delay expires. It mirrors struct kthread_delayed_work and embeds Work.
// Usable after Init (or NewDelayedWork); must not be copied after first
// use.
type DelayedWork struct {
	Work

	timer timer.Timer // set up by Init; fires timerFn, on an RT timer thread for an RT worker
	// stale counts timer callbacks that were already started when the
	// timer was stopped (timer.Timer.Stop returned false) and must be
	// ignored. guarded by owner.mu.
	stale int
}

// Init sets the function and prepares the timer. It mirrors
// kthread_init_delayed_work(). The item must be idle. The first Init
// allocates the Go timer behind it; later ones do not.
func (dw *DelayedWork) Init(fn func()) {
	dw.Work.Init(fn)
	dw.Work.dw = dw
	dw.timer.Init(dw.timerFn)
}

// NewDelayedWork returns an initialised DelayedWork that runs fn. It
// mirrors DEFINE_KTHREAD_DELAYED_WORK.
func NewDelayedWork(fn func()) *DelayedWork {
	dw := &DelayedWork{}
	dw.Init(fn)
	return dw
}

// timerFn runs on a Go timer goroutine (on the RT timer thread for a worker
// created with an RT class) when the delay expires and moves the
// item from its worker's delayed list to the worklist. Mirrors
// kthread_delayed_work_timer_fn().
//
// Each arming of the timer produces at most one callback. A callback that
// had already started when a cancel or modification stopped the timer is
// counted in stale and ignored here. Callbacks are indistinguishable, so
// when an old one and the current one race, whichever comes first consumes
// the stale count and the other queues the item: the item is queued once.
func (dw *DelayedWork) timerFn() {
	wk := dw.lockOwner()
	if wk == nil {
		return
	}
	if dw.stale > 0 {
		dw.stale--
		wk.mu.Unlock()
		return
	}
	if dw.list() != &wk.delayed {
		wk.mu.Unlock()
		return
	}
	wk.delayed.Remove(&dw.node)
	wk.worklist.PushBack(&dw.node, &dw.Work)
	wk.mu.Unlock()
	wk.parker.Unpark()
}

// stopTimerLocked disarms the timer of an item on its worker's delayed
// list and takes it off that list. Called with owner.mu held. Mirrors
// kthread_cancel_delayed_work_timer() followed by list_del_init.
func (dw *DelayedWork) stopTimerLocked(wk *Worker) {
	if !dw.timer.Stop() {
		dw.stale++
	}
	wk.delayed.Remove(&dw.node)
}

// workList is the intrusive list of work items (internal/ilist); it
// never allocates. guarded by the owning worker's mu.
type workList = ilist.List[Work]

// list returns the list holding w, nil if none. Called with owner.mu held.
func (w *Work) list() *workList { return w.node.List() }
