package wq

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"

	"github.com/gowq/wq/wqtrace"
)

// PanicInfo describes a panic recovered from a work function.
type PanicInfo struct {
	Workqueue string // queue name
	Func      string // work function name, as %ps prints it
	Value     any    // the value passed to panic
	Stack     []byte // the panicking goroutine's stack (debug.Stack)
	Worker    string // worker thread name, e.g. "kworker/0:1H"
}

// Error returns a one-line description.
func (p PanicInfo) Error() string {
	return fmt.Sprintf("wq: work function %s on %s (%s) panicked: %v", p.Func, p.Workqueue, p.Worker, p.Value)
}

var (
	panicHandler atomic.Pointer[func(PanicInfo)]
	errorHandler atomic.Pointer[func(op, fn string, err error)]
	tracer       atomic.Pointer[wqtrace.Tracer]
)

// SetPanicHandler sets the function called (on the worker thread) when a
// work function panics; nil restores the default, which logs the function
// name, the value and the stack with log/slog at error level. The worker
// keeps serving, flush waiters are released and the item counts as
// completed. Safe from any goroutine.
func SetPanicHandler(h func(PanicInfo)) {
	if h == nil {
		panicHandler.Store(nil)
		return
	}
	panicHandler.Store(&h)
}

func reportPanic(pi PanicInfo) {
	if h := panicHandler.Load(); h != nil {
		(*h)(pi)
		return
	}
	slog.Error("workqueue: work function panicked", "workqueue", pi.Workqueue,
		"function", pi.Func, "worker", pi.Worker, "panic", fmt.Sprint(pi.Value), "stack", string(pi.Stack))
}

// SetErrorHandler sets the function called when an operation that returns
// only a bool (as the kernel's do) hits a usage error: queueing on a
// destroyed queue (ErrDestroyed), a nil function (ErrNoFunc), a wait that
// would deadlock (ErrDeadlock), a bad CPU (ErrInvalidCPU). op names the
// kernel function ("queue_work_on"), fn the work function. nil restores the
// default, which logs with log/slog at warning level. Safe from any
// goroutine; the handler must not block.
func SetErrorHandler(h func(op, fn string, err error)) {
	if h == nil {
		errorHandler.Store(nil)
		return
	}
	errorHandler.Store(&h)
}

func reportError(op, fn string, err error) {
	if h := errorHandler.Load(); h != nil {
		(*h)(op, fn, err)
		return
	}
	slog.Warn("workqueue: "+op+" failed", "function", fn, "err", err)
}

// SetTracer installs t to receive the four workqueue events (queue_work,
// activate_work, execute_start, execute_end) synchronously on the thread
// where they happen; nil removes it. With no tracer the cost on the queue
// path is one atomic load and a well-predicted branch. Safe from any
// goroutine.
func SetTracer(t wqtrace.Tracer) {
	if t == nil {
		tracer.Store(nil)
		return
	}
	tracer.Store(&t)
}

func stackOf() []byte { return debug.Stack() }
