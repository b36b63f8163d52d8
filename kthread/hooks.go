package kthread

import (
	"errors"
	"fmt"
	"os"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/internal/sched"
)

// Errors. All are matched with errors.Is.
var (
	// ErrPermission: the process may not give the worker the requested
	// policy, priority or nice (no CAP_SYS_NICE and an insufficient
	// RLIMIT_RTPRIO / RLIMIT_NICE). Errors carrying it also match
	// internal/sched's ErrPermission and say how to grant the privilege.
	ErrPermission = errors.New("kthread: operation not permitted")
	// ErrInvalidArgument: an out-of-range or malformed argument (nice out
	// of [-20, 19], an empty name, a nil worker).
	ErrInvalidArgument = errors.New("kthread: invalid argument")
	// ErrInvalidCPU: a CPU that does not exist or that the process may not
	// use.
	ErrInvalidCPU = errors.New("kthread: invalid CPU")
	// ErrNoFunc: a Work without a function (not initialised with Init).
	ErrNoFunc = errors.New("kthread: work item has no function (call Init)")
	// ErrDestroyed: the worker (or PerCPU set) was destroyed, or is being
	// destroyed and refuses new work.
	ErrDestroyed = errors.New("kthread: worker destroyed")
	// ErrOtherWorker: the work item is pending, running or being cancelled
	// on another worker; a work item is attached to one worker at a time
	// (the kernel WARNs in kthread_insert_work_sanity_check).
	ErrOtherWorker = errors.New("kthread: work item is busy on another worker")
	// ErrDeadlock: a wait that would wait for the caller itself, for
	// example FlushWork of an item from inside a work function running on
	// the same worker.
	ErrDeadlock = errors.New("kthread: wait would deadlock")
	// ErrDelayedPending: Destroy found delayed work still armed (the kernel
	// requires it to be cancelled first) and cancelled it; that work will
	// not run.
	ErrDelayedPending = errors.New("kthread: delayed work was still armed at destroy and was cancelled")
	// ErrGoexit: a work function called runtime.Goexit; the worker's thread
	// was replaced (reported to the error handler).
	ErrGoexit = errors.New("kthread: work function called runtime.Goexit")
	// ErrThreadEscaped: a work function called runtime.UnlockOSThread as
	// many times as the worker's goroutine was locked (64) and then left
	// the worker's thread (it blocked or was preempted, and the Go
	// scheduler ran it on another thread and was free to run other
	// goroutines on the worker's). The worker gave that thread the
	// process's name, affinity and class back and continues on a new
	// thread with its own (reported to the error handler).
	ErrThreadEscaped = errors.New("kthread: work function unlocked the worker's goroutine from its thread (runtime.UnlockOSThread)")
	// ErrThreadLimit: starting the worker's thread would come within the
	// runtime's margin of a thread limit (RLIMIT_NPROC, a pids cgroup's
	// pids.max, kernel.threads-max or pid_max); the Go runtime aborts the
	// process when a thread creation fails, so the creation is refused.
	// The error names the limit and how to raise it.
	ErrThreadLimit = errors.New("kthread: thread limit reached")
)

// threadErr wraps a refusal of the thread gate (sched.ErrThreadLimit) in
// ErrThreadLimit; other errors pass unchanged.
func threadErr(err error) error {
	if err != nil && errors.Is(err, sched.ErrThreadLimit) && !errors.Is(err, ErrThreadLimit) {
		return fmt.Errorf("%w: %w", ErrThreadLimit, err)
	}
	return err
}

// PanicInfo describes a panic recovered from a work function.
type PanicInfo struct {
	Worker string // the worker's name, e.g. "erofs_worker/1"
	Func   string // work function name, as %ps prints it
	Value  any    // the value passed to panic
	Stack  []byte // the panicking goroutine's stack (debug.Stack)
}

// Error returns a one-line description.
func (p PanicInfo) Error() string {
	return fmt.Sprintf("kthread: work function %s on %s panicked: %v", p.Func, p.Worker, p.Value)
}

// handlers are the process-wide panic and error handlers.
var handlers report.Handlers[PanicInfo]

// SetPanicHandler sets the function called when a work function panics;
// nil restores the default, which logs the worker, the function, the
// value and the stack with log/slog at error level. The worker keeps
// serving and flush waiters are released; the item counts as done. Panics
// of items run on a PerCPU set's fallback workqueue go to
// wq.SetPanicHandler instead.
//
// The handler runs on a helper goroutine, not on the worker's thread, and
// the worker waits for it: a handler that panics (the panic is recovered
// and printed to standard error) or calls runtime.Goexit ends only that
// goroutine, and the worker carries on. The helper counts as the worker
// for waits on it: FlushWork, CancelWorkSync, FlushWorker or Destroy of
// the worker from the handler return ErrDeadlock instead of hanging. Safe
// from any goroutine; the handler should not block (it delays every item
// behind it).
func SetPanicHandler(h func(PanicInfo)) { handlers.SetPanic(h) }

func reportPanic(pi PanicInfo) {
	me := whoAmI()
	if h := handlers.Panic(nil); h != nil {
		deliver(me, "panic handler", false, func() { h(pi) })
		return
	}
	deliver(me, "log/slog", false, func() {
		report.Logger(nil).Error("kthread: work function panicked", "worker", pi.Worker,
			"function", pi.Func, "panic", fmt.Sprint(pi.Value), "stack", string(pi.Stack))
	})
}

// SetErrorHandler sets the function called when an operation that returns
// only a bool (as the kernel's do) or that runs asynchronously hits an
// error: queueing on a destroyed worker (ErrDestroyed, once per worker), on
// a second worker (ErrOtherWorker), a nil function (ErrNoFunc), a wait that
// would deadlock (ErrDeadlock), a work function that called runtime.Goexit
// (ErrGoexit) or left the worker's thread (ErrThreadEscaped), a PerCPU
// worker that could not be created after a CPU came online. op names the
// kernel function ("kthread_queue_work"), fn the work function (or the
// worker's name). nil restores the default, which logs with log/slog at
// warning level. The handler (and the default's slog call, whose handler
// may be user code too) runs on a helper goroutine that the caller waits
// for, contained as the panic handler is (see SetPanicHandler), also when
// the caller is not a worker. Safe from any goroutine; the handler must
// not block.
func SetErrorHandler(h func(op, fn string, err error)) { handlers.SetError(h) }

func reportError(op, fn string, err error) {
	me := whoAmI()
	if me.errorHandler {
		// An error caused by the error handler itself: calling it again
		// could recurse without end.
		fmt.Fprintf(os.Stderr, "kthread: %s failed (function %s): %v (caused by the error handler; not delivered to it)\n", op, fn, err)
		return
	}
	if h := handlers.Error(nil); h != nil {
		deliver(me, "error handler", true, func() { h(op, fn, err) })
		return
	}
	deliver(me, "log/slog", true, func() { report.Logger(nil).Warn("kthread: "+op+" failed", "function", fn, "err", err) })
}

// deliver runs fn, a user callback, on a new goroutine and waits for it.
// A panic in fn is recovered there and printed to standard error (not
// through log/slog, whose handler may be what panicked); runtime.Goexit
// in fn ends only that goroutine. So a callback can neither kill a
// worker's thread nor leave its item marked running. The helper acts for
// the same worker as the caller, me (see actors), so that a wait it
// starts on that worker returns ErrDeadlock instead of waiting for the
// caller, which waits for it; errorHandler marks a helper running the
// error handler (see reportError). Costs a goroutine; used on error paths
// only.
func deliver(me actor, what string, errorHandler bool, fn func()) {
	report.Contained(func() {
		defer actors.Enter(actor{wk: me.wk, errorHandler: errorHandler})()
		fn()
	}, func(r any, stack []byte) {
		fmt.Fprintf(os.Stderr, "kthread: %s panicked (recovered): %v\n%s", what, r, stack)
	})
}
