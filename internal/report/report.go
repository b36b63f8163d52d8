// Package report is how wq and kthread hand problems to user code: the
// replaceable panic and error handlers (process-wide, or per queue with a
// fallback to the process-wide ones), and the calls that run a user
// callback so that neither its panic nor its runtime.Goexit breaks the
// caller's state.
//
// Three ways to run a callback f, by what a runtime.Goexit in f may end:
//   - Safe: the calling goroutine (its exit path copes, e.g. a worker's);
//   - Guard: the calling goroutine, after onGoexit has repaired the
//     caller's state (a tracer called with an item in transit or a lock
//     held);
//   - Contained: only a helper goroutine that runs f while the caller
//     waits (a service thread, or a kthread worker that must not lose its
//     thread to a handler).
//
// A panic in f is recovered in every case and passed, with the stack, to
// the caller's onPanic, which logs it.
package report

import (
	"runtime/debug"
	"sync/atomic"
)

// ErrorFunc is an error handler: op names the kernel function
// ("queue_work_on"), fn the work function (or the queue or worker), err
// what went wrong.
type ErrorFunc = func(op, fn string, err error)

// Handlers holds a panic handler, whose argument is of type P (the
// package's PanicInfo), and an error handler. Either may be nil (unset).
// The zero value has none. Safe from any goroutine: each is one atomic
// pointer.
type Handlers[P any] struct {
	panicH atomic.Pointer[func(P)]
	errorH atomic.Pointer[ErrorFunc]
}

// SetPanic replaces the panic handler; nil unsets it.
func (h *Handlers[P]) SetPanic(f func(P)) {
	if f == nil {
		h.panicH.Store(nil)
		return
	}
	h.panicH.Store(&f)
}

// SetError replaces the error handler; nil unsets it.
func (h *Handlers[P]) SetError(f ErrorFunc) {
	if f == nil {
		h.errorH.Store(nil)
		return
	}
	h.errorH.Store(&f)
}

// Panic returns the panic handler to call: local when it is set (a
// queue's own), else h's, else nil (the caller's default applies).
func (h *Handlers[P]) Panic(local func(P)) func(P) {
	if local != nil {
		return local
	}
	if p := h.panicH.Load(); p != nil {
		return *p
	}
	return nil
}

// Error returns the error handler to call: local when it is set, else
// h's, else nil (the caller's default applies).
func (h *Handlers[P]) Error(local ErrorFunc) ErrorFunc {
	if local != nil {
		return local
	}
	if p := h.errorH.Load(); p != nil {
		return *p
	}
	return nil
}

// PanicFunc receives a panic recovered from a callback: the value passed
// to panic and the panicking goroutine's stack (debug.Stack).
type PanicFunc = func(r any, stack []byte)

// Safe calls f on the calling goroutine. A panic is recovered and passed
// to onPanic. runtime.Goexit in f is not stopped: it ends the calling
// goroutine, whose exit path must cope.
func Safe(f func(), onPanic PanicFunc) {
	defer func() {
		if r := recover(); r != nil {
			onPanic(r, debug.Stack())
		}
	}()
	f()
}

// Guard calls f on the calling goroutine. A panic is recovered and passed
// to onPanic. If f calls runtime.Goexit, onGoexit (when not nil) runs
// before the goroutine ends, so that the caller's state stays consistent
// (an item released, a lock unlocked); the goroutine's own exit path does
// the rest. It returns only when f returned or panicked.
func Guard(f func(), onPanic PanicFunc, onGoexit func()) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			onPanic(r, debug.Stack())
			return
		}
		if onGoexit != nil {
			onGoexit()
		}
	}()
	f()
	returned = true
}

// Contained calls f on a new goroutine and waits for it. A panic is
// recovered there and passed to onPanic; runtime.Goexit in f ends only
// that goroutine. It costs a goroutine start (about a microsecond): for
// error paths and rare callbacks.
func Contained(f func(), onPanic PanicFunc) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Safe(f, onPanic)
	}()
	<-done
}
