package kthread

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/timer"
)

// Real-time priorities of the kernel's helpers.
const (
	// FIFOPriority is the SCHED_FIFO priority of WithFIFO and SetFIFO:
	// MAX_RT_PRIO / 2, as sched_set_fifo() uses.
	FIFOPriority = 50
	// FIFOLowPriority is the SCHED_FIFO priority of WithFIFOLow and
	// SetFIFOLow: the lowest, as sched_set_fifo_low() uses.
	FIFOLowPriority = 1
)

// Option selects a worker's scheduling class at creation. The last class
// option given wins. With none the worker runs SCHED_OTHER at nice 0, set
// explicitly (not inherited from the creating thread), except where the
// process may not lower its nice to 0: see Worker.Class.
type Option func(*options)

type options struct {
	attr     sched.Attr
	explicit bool // a class option was given
	err      error
}

// WithFIFO makes the worker SCHED_FIFO at priority FIFOPriority (50), as
// sched_set_fifo() does. Needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 50;
// otherwise creation fails with an error matching ErrPermission.
func WithFIFO() Option {
	return func(o *options) {
		o.attr, o.explicit = sched.Attr{Policy: sched.PolicyFIFO, Priority: FIFOPriority}, true
	}
}

// WithFIFOLow makes the worker SCHED_FIFO at priority FIFOLowPriority (1),
// as sched_set_fifo_low() does: above every SCHED_OTHER thread, below every
// other RT thread. Needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1; otherwise
// creation fails with an error matching ErrPermission.
func WithFIFOLow() Option {
	return func(o *options) {
		o.attr, o.explicit = sched.Attr{Policy: sched.PolicyFIFO, Priority: FIFOLowPriority}, true
	}
}

// WithNice makes the worker SCHED_OTHER at nice n (-20..19), as
// sched_set_normal(task, n) does. A negative n needs CAP_SYS_NICE or a
// sufficient RLIMIT_NICE (else ErrPermission); n outside [-20, 19] makes
// creation fail with ErrInvalidArgument.
func WithNice(n int) Option {
	return func(o *options) {
		if n < -20 || n > 19 {
			o.err = fmt.Errorf("%w: nice %d outside [-20, 19]", ErrInvalidArgument, n)
			return
		}
		o.attr, o.explicit = sched.Attr{Policy: sched.PolicyNormal, Nice: n}, true
	}
}

func parseOptions(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o, o.err
}

// checkPrivilege fails early, with a text saying how to grant the
// privilege, when the process may not use attribute a.
func checkPrivilege(a sched.Attr) error {
	var err error
	switch {
	case a.Policy == sched.PolicyFIFO || a.Policy == sched.PolicyRR:
		err = sched.CheckRT(a.Priority)
	case a.Nice < 0:
		err = sched.CheckNice(a.Nice)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPermission, err)
	}
	return nil
}

// permErr adds ErrPermission and the diagnosis of class a (what stands
// in its way and the fix: sched.DiagnoseRefusal) to an EPERM from the
// kernel. Error path only: it reads a few files.
func permErr(a sched.Attr, err error) error {
	if errors.Is(err, sched.ErrPermission) {
		return fmt.Errorf("%w: %w; %s", ErrPermission, err, sched.Explain(a))
	}
	return err
}

// Worker is a kthread_worker: one dedicated OS thread that runs the work
// items queued on it one at a time, in queue order. It mirrors struct
// kthread_worker. The thread is locked to its goroutine, never the main
// thread and never unlocked, so its name, affinity and scheduling class
// die with it. All methods are safe from any goroutine.
//
// Locking: mu guards the lists and the state of every Work attached to the
// worker; it is held for a few instructions at a time and never across a
// work function. The wake-up of an idle worker does not go through it: see
// the package documentation.
type Worker struct {
	name string
	cpu  int     // bound CPU, -1 when unbound; immutable
	set  *PerCPU // the PerCPU set owning the worker, or nil; immutable

	// fallback is non-nil only for a PerCPU set's fallback owner: a
	// Worker value without a thread whose mu guards moving items to and
	// from the set's fallback workqueue. immutable.
	fallback *fallbackQueue

	// thread is the OS thread the worker's loop goroutine owns, nil while
	// it owns none (while a replacement thread starts, and after the
	// exit). The goroutine sets it on its thread before serving and clears
	// it, with attrMu held, before it leaves the thread for good (or as
	// soon as it finds that user code made it leave), so a non-nil value
	// always names a live thread of this process that serves the worker
	// and setters never act on a stale tid. Written under attrMu; atomic.
	thread atomic.Pointer[thread]
	parker sched.Parker // the worker's futex word; the thread parks on it

	mu       sync.Mutex
	worklist workList // guarded by mu: work_list
	delayed  workList // guarded by mu: delayed_work_list (timers armed)
	current  *Work    // guarded by mu: current_work
	dying    bool     // guarded by mu: Destroy began; new work is refused
	exited   bool     // guarded by mu: the thread left its loop for good

	attrMu sync.Mutex // serialises attribute changes with thread start, exit and replacement; before mu
	// attr is the class each thread of the worker is given: the one asked
	// for (class option, last successful setter), or the default,
	// SCHED_OTHER nice 0 (dflt). guarded by attrMu.
	attr sched.Attr
	dflt bool // guarded by attrMu: attr is the default, nobody asked for it
	// applied is the class the current (or last) thread runs at, and
	// classErr why it is not attr (nil when it is). guarded by attrMu.
	applied  sched.Attr
	classErr error

	reported atomic.Bool   // ErrDestroyed reported once
	done     chan struct{} // closed when the thread has left its loop for good

	// rtPrio is the SCHED_FIFO priority of the class the worker was
	// created with, 0 for a non-RT class. immutable. Its delayed items are
	// timed by the RT timer threads of that priority (rtTimer, taken at
	// the first arming, given back by Destroy; guarded by mu): the one of
	// the worker's CPU, or of the arming CPU for an unbound worker, as
	// add_timer() arms locally. A class set later with SetFIFO does not
	// change the timer, as it does not reserve a P.
	rtPrio  int
	rtTimer *timer.RTSet
}

// thread is one OS thread that served a worker. Each thread start makes a
// new one, so that comparing pointers cannot confuse two threads that got
// the same tid (tids are reused).
type thread struct{ tid int }

// CreateWorker starts a worker on a new OS thread named name (truncated to
// the kernel's 15 bytes in the thread name; Name returns it whole) and
// returns once the thread has its name and scheduling class. It blocks for
// the thread creation (tens of us). Errors: ErrInvalidArgument for an empty
// name or a bad option, ErrPermission (with a text saying how to grant it)
// when the process may not use the requested class; no thread is left
// behind on error; ErrThreadLimit when the thread would come within the
// thread gate's margin of a thread limit (RLIMIT_NPROC, pids.max, ...).
// Mirrors kthread_create_worker() + kthread_run().
func CreateWorker(name string, opts ...Option) (*Worker, error) {
	return create(-1, name, nil, opts)
}

// CreateWorkerOnCPU is CreateWorker for a worker bound to CPU cpu with
// sched_setaffinity; its name is name + "/" + cpu, like the kernel's
// "name/%u". Errors as CreateWorker, plus ErrInvalidCPU when cpu < 0 or
// the process may not run on cpu. The worker stays bound when the CPU goes
// offline (the kernel then moves the thread; PerCPU retires such workers).
// Mirrors kthread_create_worker_on_cpu().
func CreateWorkerOnCPU(cpu int, name string, opts ...Option) (*Worker, error) {
	if cpu < 0 {
		return nil, fmt.Errorf("kthread_create_worker_on_cpu(%d, %q): %w", cpu, name, ErrInvalidCPU)
	}
	if name == "" {
		return nil, fmt.Errorf("kthread_create_worker_on_cpu(%d): %w: empty name", cpu, ErrInvalidArgument)
	}
	return create(cpu, name+"/"+strconv.Itoa(cpu), nil, opts)
}

func create(cpu int, name string, set *PerCPU, opts []Option) (*Worker, error) {
	if name == "" {
		return nil, fmt.Errorf("kthread_create_worker: %w: empty name", ErrInvalidArgument)
	}
	o, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("kthread_create_worker(%q): %w", name, err)
	}
	if err := checkPrivilege(o.attr); err != nil {
		return nil, fmt.Errorf("kthread_create_worker(%q): %w", name, err)
	}
	wk := &Worker{name: name, cpu: cpu, set: set, attr: o.attr, dflt: !o.explicit, done: make(chan struct{})}
	if o.attr.Policy == sched.PolicyFIFO || o.attr.Policy == sched.PolicyRR {
		wk.rtPrio = o.attr.Priority
	}
	errc := make(chan error, 1)
	if err := threadErr(sched.GoLocked(func() { wk.threadMain(errc) })); err != nil {
		return nil, fmt.Errorf("kthread_create_worker(%q): %w", name, err)
	}
	if err := <-errc; err != nil {
		return nil, fmt.Errorf("kthread_create_worker(%q): %w", name, err)
	}
	return wk, nil
}

// threadMain is the body of the worker's thread (run by sched.GoLocked).
// errc receives the setup result for the first thread; it is nil for a
// thread that replaces one lost to runtime.Goexit or to an escape.
func (wk *Worker) threadMain(errc chan<- error) {
	defer actors.Enter(actor{wk: wk})()
	th := &thread{tid: sched.Gettid()}
	stopped := false
	defer func() {
		// The thread's top frame: forget the thread before the goroutine
		// exits (and the runtime destroys the thread), then let Destroy
		// return.
		wk.releaseThread(th)
		if stopped {
			close(wk.done)
		}
	}()
	wk.attrMu.Lock()
	warn, err := wk.setupLocked()
	// Published once set up (under attrMu, so setters see it only then):
	// TID() of a new or replacement thread reads 0 until the thread runs
	// the worker's class, never a thread that still has the inherited one.
	wk.thread.Store(th)
	wk.attrMu.Unlock()
	if warn != nil {
		reportDefaultClass(wk.name, warn)
	}
	if errc != nil {
		errc <- err
		if err != nil {
			return // the locked thread dies with its half-set attributes
		}
	} else if err != nil {
		reportError("kthread_worker_fn", wk.name, fmt.Errorf("replacement thread keeps serving with the attributes it could get: %w", err))
	}
	// An RT worker reserves a P while it lives, as wq's RT pools do, so
	// that it finds an idle P when the futex wakes it under load.
	wk.attrMu.Lock()
	rt := wk.attr.Policy == sched.PolicyFIFO || wk.attr.Policy == sched.PolicyRR
	wk.attrMu.Unlock()
	if rt { // a class set later with SetFIFO does not reserve
		sched.ReserveP(1)
		defer sched.ReserveP(-1)
	}
	stopped = wk.loop(th)
}

// releaseThread forgets th if it is still the worker's thread. Setters
// hold attrMu around their system call, so none acts on th afterwards.
func (wk *Worker) releaseThread(th *thread) {
	wk.attrMu.Lock()
	wk.thread.CompareAndSwap(th, nil)
	wk.attrMu.Unlock()
}

// setupLocked names the calling thread and applies the worker's affinity
// and class (applyClassLocked); it tries each even if one before failed
// (a replacement thread keeps serving with what it could get) and
// returns the first error. warn is a default class that could not be
// applied, for the caller to report once attrMu is unlocked. Called on
// the worker's thread with attrMu held.
func (wk *Worker) setupLocked() (warn, err error) {
	var cpus []int
	if wk.cpu >= 0 {
		cpus = []int{wk.cpu}
	}
	r := sched.ThreadSetup{Name: wk.name, CPUs: cpus, Attr: wk.attr}.Apply()
	err = r.Name
	if e := r.Affinity; e != nil && err == nil {
		err = e
		if errors.Is(e, unix.EINVAL) {
			err = fmt.Errorf("%w: CPU %d: %w", ErrInvalidCPU, wk.cpu, e)
		}
	}
	warn, e := wk.classAppliedLocked(r.Class)
	if e != nil && err == nil {
		err = e
	}
	return warn, err
}

// loop is kthread_worker_fn(): run the worklist in order, park in the
// futex when it is empty. It returns true when the worker stops for good
// (Destroy and an empty worklist) and false when the calling goroutine
// has retired (retire): a work function called runtime.Goexit or made it
// leave its thread, and a replacement thread has taken over the loop. th
// is the thread the calling goroutine owns.
//
// The loop holds one lock level of its own (runtime.LockOSThread) except
// while a work function runs (see run): whatever a work function did to
// the nesting count, the goroutine is locked to its thread while it
// parks, waits for mu or exits, so the thread never goes back to the Go
// scheduler from here.
func (wk *Worker) loop(th *thread) bool {
	runtime.LockOSThread()
	wk.mu.Lock()
	for {
		wk.current = nil
		w := wk.worklist.PopFront()
		if w == nil {
			if wk.dying {
				wk.exited = true
				wk.mu.Unlock()
				return true
			}
			wk.mu.Unlock()
			// A goroutine that the last items readied may sit in this
			// thread's P: give the P up first then (sched.RunnableBehind).
			if sched.RunnableBehind() {
				wk.parker.ParkHandOff()
			} else {
				wk.parker.Park()
			}
			wk.mu.Lock()
			continue
		}
		wk.current = w
		wk.mu.Unlock()
		if w.barrier != nil {
			close(w.barrier) // kthread_flush_work_fn
		} else if !wk.run(w, th) {
			return false
		}
		wk.mu.Lock()
	}
}

// run calls w's function with panics recovered, with the loop's own lock
// level given up meanwhile (the sched.LockDepth levels of sched.GoLocked
// remain). It returns false when the calling goroutine has retired: the
// function called runtime.Goexit (the goroutine, and with it the locked
// thread, is then ending), or the goroutine is no longer on th: the
// function called runtime.UnlockOSThread as many times as it was locked
// and then blocked or was preempted, so the Go scheduler moved it and
// may run other goroutines on th. A replacement thread (same name,
// affinity and class) then continues the loop, and ErrGoexit or
// ErrThreadEscaped is reported. Fewer calls only lower the nesting count
// and are harmless. The check costs a gettid per item.
func (wk *Worker) run(w *Work, th *thread) (ok bool) {
	returned := false
	runtime.UnlockOSThread() // the loop's level
	defer func() {
		// Locked again, to whatever thread the goroutine is on now: if it
		// ends here (Goexit), that thread ends with it.
		runtime.LockOSThread()
		var cause error
		if !returned {
			if r := recover(); r != nil {
				reportPanic(PanicInfo{Worker: wk.name, Func: w.Func(), Value: r, Stack: debug.Stack()})
			} else {
				cause = ErrGoexit
			}
		}
		if !sched.StillOn(th.tid) {
			if cause != nil {
				cause = fmt.Errorf("%w; %w", ErrThreadEscaped, cause)
			} else {
				cause = ErrThreadEscaped
			}
		}
		if cause == nil {
			ok = true
			return
		}
		wk.retire(th, w.Func(), cause)
		ok = false
	}()
	w.fn()
	returned = true
	return true
}

// retire ends the calling goroutine's service on th, after a work
// function called runtime.Goexit (cause ErrGoexit) or made it leave th
// (cause matching ErrThreadEscaped): it forgets th (under attrMu, so that
// TID and the setters never see it again), gives an escaped th the
// process's attributes back (repairLocked), reports cause, marks the item
// done and starts a replacement thread, which applies the worker's name,
// affinity and class and continues the loop. The calling
// goroutine must then end; it is locked to the thread it is on, which
// ends with it.
func (wk *Worker) retire(th *thread, fn string, cause error) {
	var repair error
	wk.attrMu.Lock()
	wk.thread.CompareAndSwap(th, nil)
	if errors.Is(cause, ErrThreadEscaped) {
		repair = wk.repairLocked(th)
	}
	wk.attrMu.Unlock()
	err := fmt.Errorf("%w; worker %s continues on a new thread", cause, wk.name)
	if repair != nil {
		err = fmt.Errorf("%w; thread %d keeps some of the worker's attributes: %w", err, th.tid, repair)
	}
	// Reported before the item is done, so that whoever flushed it sees
	// the report once the flush returns.
	reportError("kthread_worker_fn", fn, err)
	wk.mu.Lock()
	wk.current = nil
	wk.mu.Unlock()
	wk.respawn()
}

// respawnRetry is how often a worker whose replacement thread the thread
// gate refused tries again; its items wait meanwhile, none is dropped.
const respawnRetry = 10 * time.Millisecond

// respawn starts the replacement thread of a retired one. If the thread
// gate refuses (a thread limit is near), it reports ErrThreadLimit once
// and tries again every respawnRetry from a Go timer; Destroy waits for
// the replacement like for any thread of the worker.
func (wk *Worker) respawn() {
	wk.respawnTry(true)
}

func (wk *Worker) respawnTry(first bool) {
	err := threadErr(sched.GoLocked(func() { wk.threadMain(nil) }))
	if err == nil {
		return
	}
	if first {
		reportError("kthread_worker_fn", wk.name, fmt.Errorf("no replacement thread yet, retrying every %v: %w", respawnRetry, err))
	}
	time.AfterFunc(respawnRetry, func() { wk.respawnTry(false) })
}

// repairLocked gives th, which the calling goroutine has left, the
// process's attributes back (sched.ResetThread): th is back in the Go
// scheduler and may run any goroutine. It leaves th alone if th has
// exited or been renamed: then another owner locked it and gave it
// attributes of its own. Called with attrMu held.
func (wk *Worker) repairLocked(th *thread) error {
	if name, err := sched.ThreadName(th.tid); err != nil || name != threadName(wk.name) {
		return nil
	}
	return sched.ResetThread(th.tid)
}

// threadName is name as the kernel keeps it: its first 15 bytes.
func threadName(name string) string {
	if len(name) > 15 {
		return name[:15]
	}
	return name
}

// Name returns the worker's full name ("name" or "name/cpu"); the thread
// name is its first 15 bytes.
func (wk *Worker) Name() string { return wk.name }

// CPU returns the CPU the worker is bound to, or -1 for an unbound worker.
func (wk *Worker) CPU() int { return wk.cpu }

// TID returns the thread id of the worker's thread (for sched_getattr,
// taskset, ps -L), or 0 when the worker has no thread: after Destroy has
// returned (the thread has exited or is exiting), and for a moment while a
// replacement thread starts. A non-zero TID is a live thread of this
// process that serves the worker when TID reads it (the id may belong to
// another thread later: tids are reused). It changes when the thread is
// replaced (a work function called runtime.Goexit or made the worker leave
// its thread, see the package documentation). Never blocks.
func (wk *Worker) TID() int {
	if th := wk.thread.Load(); th != nil {
		return th.tid
	}
	return 0
}

// result of queueing.
type result int

const (
	queued    result = iota
	busy             // pending or being cancelled here: the kernel's false
	refused          // the worker is dying or destroyed
	elsewhere        // busy on another owner
)

// attach makes wk the owner of w when w is unowned or idle on its owner,
// and returns nil with wk.mu held; or returns the other owner, on which w
// is busy, with nothing locked.
func (wk *Worker) attach(w *Work) *Worker {
	for {
		o := w.owner.Load()
		switch {
		case o == nil:
			if !w.owner.CompareAndSwap(nil, wk) {
				continue
			}
		case o != wk:
			o.mu.Lock()
			if w.owner.Load() != o {
				o.mu.Unlock()
				continue
			}
			if !o.idleLocked(w) {
				o.mu.Unlock()
				return o
			}
			w.owner.Store(wk)
			o.mu.Unlock()
		}
		wk.mu.Lock()
		if w.owner.Load() == wk {
			return nil
		}
		wk.mu.Unlock()
	}
}

// idleLocked reports whether w, owned by wk, is neither pending, nor
// running, nor being cancelled. Called with wk.mu held.
func (wk *Worker) idleLocked(w *Work) bool {
	if wk.fallback != nil {
		return wk.fallback.idle(w)
	}
	return w.list() == nil && w.canceling == 0 && wk.current != w
}

// insertLocked queues w, owned by wk, at the tail of the worklist. A dying
// worker accepts only a requeue of its current item: from that item's own
// function, or (chainAny, PerCPU) from anywhere, so that a running item's
// requeue is neither lost nor run concurrently elsewhere. Called with
// wk.mu held.
func (wk *Worker) insertLocked(w *Work, chainAny bool) result {
	if wk.fallback != nil {
		return wk.fallback.insertLocked(w)
	}
	if w.list() != nil || w.canceling > 0 {
		return busy // queuing_blocked(); a pending item runs before a dying worker exits
	}
	if wk.dying && (wk.current != w || !(chainAny || wk.self())) {
		return refused
	}
	wk.worklist.PushBack(&w.node, w)
	return queued
}

// queue is kthread_queue_work without the reporting.
func (wk *Worker) queue(w *Work, chainAny bool) (result, *Worker) {
	if other := wk.attach(w); other != nil {
		return elsewhere, other
	}
	r := wk.insertLocked(w, chainAny)
	wk.mu.Unlock()
	if r == queued && wk.fallback == nil {
		wk.parker.Unpark()
	}
	return r, nil
}

// valid reports (and returns false for) a nil worker or an item without
// a function.
func (wk *Worker) valid(op string, w *Work) bool {
	switch {
	case w == nil || w.fn == nil:
		reportError(op, "", ErrNoFunc)
		return false
	case wk == nil || wk.fallback != nil:
		reportError(op, w.Func(), fmt.Errorf("%w: nil worker", ErrInvalidArgument))
		return false
	}
	return true
}

// validDelayed is valid for a DelayedWork, which must have been
// initialised with DelayedWork.Init (or NewDelayedWork) for its timer.
func (wk *Worker) validDelayed(op string, dw *DelayedWork) bool {
	if dw == nil || !dw.timer.Ready() || dw.Work.dw != dw {
		reportError(op, "", fmt.Errorf("%w: delayed work not initialised with DelayedWork.Init", ErrNoFunc))
		return false
	}
	return wk.valid(op, &dw.Work)
}

// finish turns a queue result into the kernel's bool, reporting errors.
func (wk *Worker) finish(op string, w *Work, r result, other *Worker) bool {
	switch r {
	case queued:
		return true
	case refused:
		wk.reportDestroyed(op, w)
	case elsewhere:
		reportError(op, w.Func(), fmt.Errorf("%w: attached to %s, queued on %s", ErrOtherWorker, other.name, wk.name))
	}
	return false
}

func (wk *Worker) reportDestroyed(op string, w *Work) {
	if wk.reported.CompareAndSwap(false, true) {
		reportError(op, w.Func(), fmt.Errorf("%w: %s", ErrDestroyed, wk.name))
	}
}

// QueueWork queues w at the tail of the worker's list and wakes the worker
// with a futex wake if it sleeps. It returns true if it queued w, false if
// w was already pending (or being cancelled). It never blocks (beyond the
// worker's short lock) and makes no allocation. It also returns false,
// reporting to the error handler, when w has no function (ErrNoFunc), is
// busy on another worker (ErrOtherWorker), or the worker is destroyed or
// being destroyed (ErrDestroyed, reported once per worker). Queueing w
// while it runs is allowed: it runs again after. Mirrors
// kthread_queue_work().
func (wk *Worker) QueueWork(w *Work) bool {
	const op = "kthread_queue_work"
	if !wk.valid(op, w) {
		return false
	}
	r, other := wk.queue(w, false)
	return wk.finish(op, w, r, other)
}

// QueueDelayedWork arms dw's timer to queue it on the worker after d (d <=
// 0 queues it at once). It returns true if it armed or queued dw, false if
// dw was already pending (armed or queued) or being cancelled. Errors are
// reported as for QueueWork. Never blocks; makes no allocation. Mirrors
// kthread_queue_delayed_work().
func (wk *Worker) QueueDelayedWork(dw *DelayedWork, d time.Duration) bool {
	const op = "kthread_queue_delayed_work"
	if !wk.validDelayed(op, dw) {
		return false
	}
	w := &dw.Work
	if other := wk.attach(w); other != nil {
		return wk.finish(op, w, elsewhere, other)
	}
	if wk.dying {
		wk.mu.Unlock()
		return wk.finish(op, w, refused, nil)
	}
	if w.list() != nil || w.canceling > 0 {
		wk.mu.Unlock()
		return false
	}
	wk.armLocked(dw, d)
	wk.mu.Unlock()
	if d <= 0 {
		wk.parker.Unpark()
	}
	return true
}

// armLocked queues dw after d. Called with wk.mu held, dw idle on wk.
// Mirrors __kthread_queue_delayed_work().
func (wk *Worker) armLocked(dw *DelayedWork, d time.Duration) {
	if d <= 0 {
		wk.worklist.PushBack(&dw.node, &dw.Work)
		return
	}
	wk.delayed.PushBack(&dw.node, &dw.Work)
	var rt *timer.RT
	if wk.rtPrio > 0 {
		if wk.rtTimer == nil {
			wk.rtTimer = timer.AcquireRT(wk.rtPrio)
		}
		rt = wk.rtTimer.On(wk.cpu)
	}
	dw.timer.Reset(d, rt)
}

// ModDelayedWork modifies dw's delay: whether dw was armed, queued or idle,
// it ends up armed to be queued after d (d <= 0: queued now). It returns
// true if dw was pending (armed or queued) and has been modified, false if
// it was idle and is now armed or queued (the kernel's return value, so
// that it can be used for reference counting). If a CancelDelayedWorkSync
// of dw is in progress, the cancel wins: ModDelayedWork returns true and
// does not queue. Errors as QueueWork (returning false). Never blocks.
// Mirrors kthread_mod_delayed_work().
func (wk *Worker) ModDelayedWork(dw *DelayedWork, d time.Duration) bool {
	const op = "kthread_mod_delayed_work"
	if !wk.validDelayed(op, dw) {
		return false
	}
	w := &dw.Work
	if other := wk.attach(w); other != nil {
		return wk.finish(op, w, elsewhere, other)
	}
	if wk.dying {
		wk.mu.Unlock()
		return wk.finish(op, w, refused, nil)
	}
	if w.canceling > 0 {
		wk.mu.Unlock()
		return true
	}
	was := false
	switch w.list() {
	case &wk.delayed:
		dw.stopTimerLocked(wk)
		was = true
	case &wk.worklist:
		wk.worklist.Remove(&w.node)
		was = true
	}
	wk.armLocked(dw, d)
	wk.mu.Unlock()
	if d <= 0 {
		wk.parker.Unpark()
	}
	return was
}

// newBarrier returns a flush barrier (struct kthread_flush_work) owned by
// wk; the worker closes its channel when it reaches it.
func newBarrier(wk *Worker) *Work {
	b := &Work{barrier: make(chan struct{})}
	b.owner.Store(wk)
	return b
}

// FlushWork waits until the last queueing of w has finished executing. It
// returns true if it waited, false if w was idle. A delayed item whose
// timer is armed is queued at once and waited for. The work item's own
// worker is used (the kernel's work->worker), even if it is not wk; for an
// item queued through a PerCPU set's fallback, the fallback workqueue's
// flush is used. It blocks for as long as that takes. Called from a work
// function of the same worker (or a handler running for one) it would
// wait forever: it returns false at once and reports ErrDeadlock. The
// check costs a few us, and only when the call would wait. Mirrors
// kthread_flush_work().
func (wk *Worker) FlushWork(w *Work) bool { return flushWork(w) }

func flushWork(w *Work) bool {
	if w == nil {
		return false
	}
	o := w.lockOwner()
	if o == nil {
		return false
	}
	if o.fallback != nil {
		o.mu.Unlock()
		return o.fallback.flush(w)
	}
	running := o.current == w
	if w.list() == nil && !running {
		o.mu.Unlock()
		return false
	}
	if o.self() {
		o.mu.Unlock()
		reportError("kthread_flush_work", w.Func(), ErrDeadlock)
		return false
	}
	if w.list() == &o.delayed {
		w.dw.stopTimerLocked(o)
		o.worklist.PushBack(&w.node, w)
	}
	b := newBarrier(o)
	if w.list() != nil {
		o.worklist.InsertAfter(&w.node, &b.node, b)
	} else {
		o.worklist.PushFront(&b.node, b)
	}
	o.mu.Unlock()
	o.parker.Unpark()
	<-b.barrier
	return true
}

// FlushWorker waits until every item queued on the worker before the call
// has finished executing (items queued during the wait may still be
// pending; delayed items whose timer has not fired are not waited for).
// It returns at once on a destroyed worker. Called from one of the
// worker's own work functions (or a handler running for one) it would
// wait forever: it returns at once and reports ErrDeadlock. Mirrors
// kthread_flush_worker().
func (wk *Worker) FlushWorker() {
	if wk == nil || wk.fallback != nil {
		return
	}
	if wk.self() {
		reportError("kthread_flush_worker", wk.name, ErrDeadlock)
		return
	}
	wk.mu.Lock()
	if wk.exited {
		wk.mu.Unlock()
		return
	}
	b := newBarrier(wk)
	wk.worklist.PushBack(&b.node, b)
	wk.mu.Unlock()
	wk.parker.Unpark()
	<-b.barrier
}

// CancelWorkSync removes w from its worker's list if it is pending (and
// stops its timer if it is a delayed item), then waits for a running
// instance to finish. While it waits, queueing w returns false. It returns
// true if w was pending. The item's own worker is used, as for FlushWork.
// Called from w's own function (or another item of the same worker, or a
// handler running for one) it does not wait (that would deadlock) and
// reports ErrDeadlock. Mirrors kthread_cancel_work_sync().
func (wk *Worker) CancelWorkSync(w *Work) bool { return cancelSync("kthread_cancel_work_sync", w) }

// CancelDelayedWorkSync stops dw's timer, removes dw from its worker's
// list and waits for a running instance to finish. It returns true if dw
// was pending (armed or queued). Otherwise as CancelWorkSync. Mirrors
// kthread_cancel_delayed_work_sync().
func (wk *Worker) CancelDelayedWorkSync(dw *DelayedWork) bool {
	if dw == nil {
		return false
	}
	return cancelSync("kthread_cancel_delayed_work_sync", &dw.Work)
}

// cancelSync is __kthread_cancel_work_sync().
func cancelSync(op string, w *Work) bool {
	if w == nil {
		return false
	}
	o := w.lockOwner()
	if o == nil {
		return false
	}
	if o.fallback != nil {
		o.mu.Unlock()
		return o.fallback.cancelSync(w)
	}
	was := false
	switch w.list() {
	case &o.delayed:
		w.dw.stopTimerLocked(o)
		was = true
	case &o.worklist:
		o.worklist.Remove(&w.node)
		was = true
	}
	if o.current != w {
		o.mu.Unlock()
		return was
	}
	if o.self() {
		o.mu.Unlock()
		reportError(op, w.Func(), ErrDeadlock)
		return was
	}
	// Wait for the running instance with queueing blocked: a barrier at
	// the head of the list runs right after it.
	w.canceling++
	b := newBarrier(o)
	o.worklist.PushFront(&b.node, b)
	o.mu.Unlock()
	o.parker.Unpark()
	<-b.barrier
	o.mu.Lock() // the owner cannot change while canceling > 0
	w.canceling--
	o.mu.Unlock()
	return was
}

// Destroy stops the worker: it refuses new work from then on (QueueWork
// returns false and reports ErrDestroyed once), waits until every item
// queued before has run (requeues of the running item from its own
// function are still accepted, as in the kernel's drain), and waits for
// the thread to exit. The kernel requires delayed work to be cancelled
// before kthread_destroy_worker(); Destroy cancels any delayed item still
// armed (it will not run) and then returns an error matching
// ErrDelayedPending that names them. When Destroy returns, no item of the
// worker is pending (FlushWork and the cancels of each return false at
// once, and each may be queued on another worker) and TID reads 0.
// Otherwise it returns nil, also on a second call, which waits for the
// first. Called from one of the worker's own work functions, or from a
// handler running for one (see SetPanicHandler), it would deadlock: it
// returns an error matching ErrDeadlock (also reported) and destroys
// nothing. Blocks until the queued items have run. Mirrors
// kthread_destroy_worker().
func (wk *Worker) Destroy() error {
	if wk == nil || wk.fallback != nil {
		return fmt.Errorf("kthread_destroy_worker: %w: nil worker", ErrInvalidArgument)
	}
	if wk.self() {
		err := fmt.Errorf("kthread_destroy_worker(%s): %w: called from its own work function", wk.name, ErrDeadlock)
		reportError("kthread_destroy_worker", wk.name, err)
		return err
	}
	wk.mu.Lock()
	if wk.dying {
		wk.mu.Unlock()
		<-wk.done
		return nil
	}
	wk.dying = true
	var cancelled []string
	for !wk.delayed.Empty() {
		w := wk.delayed.Front()
		w.dw.stopTimerLocked(wk)
		cancelled = append(cancelled, w.Func())
	}
	wk.mu.Unlock()
	wk.parker.Unpark()
	<-wk.done
	wk.mu.Lock()
	rt := wk.rtTimer
	wk.rtTimer = nil
	wk.mu.Unlock()
	if rt != nil {
		// Every timer of the worker is stopped; a callback already
		// started finds the item off the delayed list and returns.
		rt.Release()
	}
	if len(cancelled) > 0 {
		return fmt.Errorf("kthread_destroy_worker(%s): %w: %d item(s): %s", wk.name, ErrDelayedPending,
			len(cancelled), strings.Join(cancelled, ", "))
	}
	return nil
}

// SetFIFO switches the running worker to SCHED_FIFO at FIFOPriority (50).
// It returns an error matching ErrPermission, with a text saying how to
// grant the privilege, when the kernel refuses (no CAP_SYS_NICE and
// RLIMIT_RTPRIO, or a cgroup without RT runtime), and then changes
// nothing: neither the thread nor the class that Class reports and that a
// replacement thread gets. ErrDestroyed for a destroyed worker,
// ErrInvalidArgument for nil. It acts on the worker's current thread
// (one sched_setattr, under the lock that the thread takes before it
// exits, so never on a stale tid); while a replacement thread starts, it
// checks the class on a short-lived probe thread and the replacement
// applies it. The class is kept if the thread is ever replaced. It blocks
// for a system call (tens of us with a probe thread). Mirrors
// sched_set_fifo(worker->task).
func SetFIFO(wk *Worker) error {
	return wk.setAttr("sched_set_fifo", sched.Attr{Policy: sched.PolicyFIFO, Priority: FIFOPriority})
}

// SetFIFOLow switches the running worker to SCHED_FIFO at FIFOLowPriority
// (1). Errors as SetFIFO. Mirrors sched_set_fifo_low(worker->task).
func SetFIFOLow(wk *Worker) error {
	return wk.setAttr("sched_set_fifo_low", sched.Attr{Policy: sched.PolicyFIFO, Priority: FIFOLowPriority})
}

// SetNormal switches the running worker to SCHED_OTHER at nice (-20..19).
// Errors as SetFIFO, plus ErrInvalidArgument for a nice out of range.
// Lowering the thread's nice (a negative one, or back down after raising
// it, or below the nice the process runs at) needs CAP_SYS_NICE or
// RLIMIT_NICE; refused, it changes nothing. Mirrors
// sched_set_normal(worker->task, nice).
func SetNormal(wk *Worker, nice int) error {
	if nice < -20 || nice > 19 {
		return fmt.Errorf("sched_set_normal: %w: nice %d outside [-20, 19]", ErrInvalidArgument, nice)
	}
	return wk.setAttr("sched_set_normal", sched.Attr{Policy: sched.PolicyNormal, Nice: nice})
}

func (wk *Worker) setAttr(op string, a sched.Attr) error {
	if wk == nil || wk.fallback != nil {
		return fmt.Errorf("%s: %w: nil worker", op, ErrInvalidArgument)
	}
	// attrMu is held across the system call: the thread cannot be
	// forgotten (and exit) meanwhile, so tid is never stale.
	wk.attrMu.Lock()
	defer wk.attrMu.Unlock()
	wk.mu.Lock()
	exited := wk.exited
	wk.mu.Unlock()
	if exited {
		return fmt.Errorf("%s(%s): %w", op, wk.name, ErrDestroyed)
	}
	th := wk.thread.Load()
	if th != nil {
		// One sched_setattr: the kernel applies all of it or nothing.
		if err := sched.SetAttr(th.tid, a); err != nil {
			return fmt.Errorf("%s(%s): %w", op, wk.name, permErr(a, err))
		}
		wk.applied, wk.classErr = a, nil
	} else if err := sched.Probe(nil, &a); err != nil {
		// Between two threads: the replacement applies wk.attr when it
		// starts; check on a short-lived thread that it can.
		return fmt.Errorf("%s(%s): %w", op, wk.name, permErr(a, err))
	}
	wk.attr, wk.dflt = a, false
	return nil
}
