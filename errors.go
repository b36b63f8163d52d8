package wq

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// The errors of package wq: every exported error, with the calls that
// return or report it and, where the kernel has one, its errno.

// Errors. All are matched with errors.Is.
var (
	// ErrInvalidFlags: contradictory or unknown flags (the kernel's -EINVAL).
	ErrInvalidFlags = errors.New("wq: invalid flags")
	// ErrInvalidArgument: an out-of-range or malformed argument (the
	// kernel's -EINVAL): Alloc, the attribute writes, the process-wide
	// setters, and a call on a nil *Workqueue or with a nil context.
	ErrInvalidArgument = errors.New("wq: invalid argument")
	// ErrDestroyed: the workqueue was destroyed.
	ErrDestroyed = errors.New("wq: workqueue destroyed")
	// ErrDraining: a queue attempt from outside the queue while it drains.
	ErrDraining = errors.New("wq: workqueue is draining")
	// ErrQueueFull: a queue call on a queue that holds max_active +
	// MaxPending items; the call returns false (Go, QueueErr: this error;
	// QueueContext, GoContext, Submit and Group.Go wait instead) and the
	// Work is left as it was.
	ErrQueueFull = errors.New("wq: workqueue is full (MaxPending)")
	// ErrKeyConflict: QueueKeyed of a Work whose keyed instance is still in
	// flight (chained, queued or running) under another key or on another
	// queue; the call returns false and the Work is left as it was.
	ErrKeyConflict = errors.New("wq: work item is in flight under another key")
	// ErrOtherQueue: the work item is running on a worker of another
	// workqueue; queueing it on a second queue before that instance ends
	// is refused (it would run concurrently with itself). Flush it first.
	ErrOtherQueue = errors.New("wq: work item is running on another workqueue")
	// ErrNoFunc: a Work without a function (not initialised with Init).
	ErrNoFunc = errors.New("wq: work item has no function (call Init)")
	// ErrInvalidCPU: a CPU number that does not exist on this machine.
	ErrInvalidCPU = errors.New("wq: invalid CPU")
	// ErrPermission: the process may not set the requested policy or nice
	// (sched_setscheduler's -EPERM): Alloc without AllowRTFallback,
	// SetPolicy, SetNice, SetRTPriority and SetHighPriPolicy.
	ErrPermission = errors.New("wq: operation not permitted")
	// ErrDeadlock: a wait that would wait for the caller itself (for example
	// CancelSync of a work item from inside its own function).
	ErrDeadlock = errors.New("wq: wait would deadlock")
	// ErrReadOnly: a write to an attribute that cannot change on this queue.
	ErrReadOnly = errors.New("wq: attribute is read-only")
	// ErrDelayedPending: Destroy found delayed items still armed on the
	// queue; it cancelled them (they are idle) and reports them.
	ErrDelayedPending = errors.New("wq: delayed work still armed at destroy")
	// ErrWorkerExit: a worker's goroutine ended or left its thread in a
	// callback (runtime.Goexit, runtime.UnlockOSThread); the worker was
	// retired and replaced, and its item finished.
	ErrWorkerExit = errors.New("wq: worker thread lost")
	// ErrThreadLimit: creating one more thread would come within the
	// thread gate's margin (8, or GOMAXPROCS + 4 when more) of a limit on
	// the process's threads (a pids cgroup's pids.max, RLIMIT_NPROC,
	// kernel.threads-max or kernel.pid_max), read again for every
	// creation. The Go runtime aborts the whole process when it cannot
	// create a thread, so every thread gowq starts stops short: a worker
	// creation fails with this error (reported through the error
	// handler), Alloc of a MemReclaim queue (its rescuer thread) and an
	// attribute write that needs a probe thread are refused with it. The
	// text names the limit and how to raise it. The kernel's clone fails
	// at these limits with -EAGAIN.
	ErrThreadLimit = errors.New("wq: thread limit reached")
)

// ErrDisabled: QueueErr or QueueOnErr of an item that is disabled
// (Disable) or held by a CancelSync or DisableSync in progress. The item
// is not queued and will not run; Queue returns false for it without a
// report, as the kernel's queue_work does.
var ErrDisabled = errors.New("wq: work item is disabled")

// ErrCancelled: a function of a Group or a Future that was cancelled
// before it started (CancelPending drops queued items): the Group counts
// it as the function's error, the Future is done with it.
var ErrCancelled = errors.New("wq: work item cancelled before it ran")

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
