package wq

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error of a function of a Group or a Future that
// panicked: Group.Wait and Future.Wait return it (match it with
// errors.As). The panic was recovered on the worker, which went on
// serving. Items queued with Queue, Go or GoContext report their panics
// to the panic handler (PanicInfo) instead.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack (runtime/debug.Stack)
}

// Error returns "wq: work function panicked: " and the value.
func (p *PanicError) Error() string {
	return fmt.Sprintf("wq: work function panicked: %v", p.Value)
}

// Unwrap returns the panic value when it is an error (so that errors.Is
// finds it), nil otherwise.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}

// errGoexit is the error of a Group or Future function that called
// runtime.Goexit: its worker was retired and replaced.
var errGoexit = fmt.Errorf("%w: the function called runtime.Goexit", ErrWorkerExit)

// newPanicError makes the *PanicError of a panic recovered inside a Group
// or Future item, with the stack of the panicking goroutine (call it from
// the deferred function that recovered), and counts the panic in the
// queue's Stats().Panics as the worker counts the panics it recovers
// itself. On the item's worker.
func newPanicError(r any) *PanicError {
	if wk := selfWorker(); wk != nil {
		if pq := wk.currentPwq; pq != nil { // the worker's own field
			pq.stats.panics.Add(1)
		}
	}
	return &PanicError{Value: r, Stack: debug.Stack()}
}
