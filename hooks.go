package wq

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/wqtrace"
)

// PanicInfo describes a panic recovered from a work function.
type PanicInfo struct {
	Workqueue string // queue name
	Func      string // work function name, as %ps prints it
	Value     any    // the value passed to panic
	Stack     []byte // the panicking goroutine's stack (debug.Stack)
	Worker    string // worker thread name, e.g. "kworker/0:1H"
	// Work is the item whose function panicked. It may already be queued
	// again (or running again elsewhere) when the handler reads it; use it
	// to identify the item (compare it with the caller's own), not to
	// inspect its state.
	Work *Work
}

// Error returns a one-line description.
func (p PanicInfo) Error() string {
	return fmt.Sprintf("wq: work function %s on %s (%s) panicked: %v", p.Func, p.Workqueue, p.Worker, p.Value)
}

var (
	handlers report.Handlers[PanicInfo] // the process-wide panic and error handlers
	tracer   atomic.Pointer[wqtrace.Tracer]
)

// reportPanic calls the process-wide panic handler (see
// Workqueue.reportPanic).
func reportPanic(pi PanicInfo) { (*Workqueue)(nil).reportPanic(pi) }

// reportPanic calls q's panic handler, or the process-wide one when q
// has none (or q is nil); a handler that panics is recovered and logged.
// (A handler that calls runtime.Goexit ends the worker, which the
// worker's exit path handles like a Goexit in the work function.)
func (q *Workqueue) reportPanic(pi PanicInfo) {
	var local func(PanicInfo)
	if q != nil {
		local = q.panicHandler
	}
	if h := handlers.Panic(local); h != nil {
		callSafe("panic handler", func() { h(pi) })
		return
	}
	q.log().Error("workqueue: work function panicked", "workqueue", pi.Workqueue,
		"function", pi.Func, "worker", pi.Worker, "panic", fmt.Sprint(pi.Value), "stack", string(pi.Stack))
}

// reportError calls the process-wide error handler (see
// Workqueue.reportError).
func reportError(op, fn string, err error) { (*Workqueue)(nil).reportError(op, fn, err) }

// reportError calls q's error handler, or the process-wide one when q has
// none (or q is nil), on the calling goroutine. A panic in the handler is
// recovered and logged, as the tracer's and the panic handler's are; a
// runtime.Goexit ends the caller's goroutine, so callers report only once
// their state is consistent (an item they owned is released).
func (q *Workqueue) reportError(op, fn string, err error) {
	var local func(op, fn string, err error)
	if q != nil {
		local = q.errorHandler
	}
	if h := handlers.Error(local); h != nil {
		callSafe("error handler", func() { h(op, fn, err) })
		return
	}
	if q != nil {
		q.log().Warn("workqueue: "+op+" failed", "workqueue", q.name, "function", fn, "err", err)
		return
	}
	plog().Warn("workqueue: "+op+" failed", "function", fn, "err", err)
}

func stackOf() []byte { return debug.Stack() }

// logPanic logs a panic recovered from the callback what.
func logPanic(what string) report.PanicFunc {
	return func(r any, stack []byte) {
		plog().Error("workqueue: "+what+" panicked", "panic", fmt.Sprint(r), "stack", string(stack))
	}
}

// callSafe calls a user callback f with a panic recovered and logged.
// runtime.Goexit in f is not stopped: it ends the calling goroutine, whose
// exit path must cope (workers: main's deferred exit path).
func callSafe(what string, f func()) { report.Safe(f, logPanic(what)) }

// callContained calls a user callback f on a helper goroutine and waits
// for it: a panic is recovered and logged, and runtime.Goexit ends only the
// helper. Used where the caller is a gowq service thread (the CM monitor,
// the watchdog) that a callback must not end.
func callContained(what string, f func()) { report.Contained(f, logPanic(what)) }

// goReport runs f (a report to the user's handlers) on its own goroutine,
// contained, without waiting: for reports made with a lock held or from a
// worker's exit path.
func goReport(f func()) { go callSafe("error handler", f) }

// emit delivers ev to the tracer t on the calling thread (tracepoints are
// synchronous). A tracer that panics is recovered and logged. If it calls
// runtime.Goexit, onGoexit (if not nil) runs before the goroutine ends, so
// that the caller's state stays consistent (an item is released, a pool
// lock is unlocked); on a worker, main's exit path does the rest.
func emit(t *wqtrace.Tracer, ev *wqtrace.Event, onGoexit func()) {
	report.Guard(func() { (*t).Trace(ev) }, func(r any, stack []byte) {
		plog().Error("workqueue: tracer panicked", "workqueue", ev.Workqueue, "event", ev.Kind.String(), "panic", fmt.Sprint(r), "stack", string(stack))
	}, onGoexit)
}
