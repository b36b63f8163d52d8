package kthread

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/internal/sched"
)

// Class is a scheduling class as a worker's thread runs it.
type Class struct {
	// Policy is the policy as chrt(1) names it: "SCHED_OTHER" or
	// "SCHED_FIFO" (or, for a thread that kept an inherited class,
	// whatever it inherited, e.g. "SCHED_BATCH").
	Policy string
	// Priority is the SCHED_FIFO priority, 1..99; 0 for SCHED_OTHER.
	Priority int
	// Nice is the nice value, -20..19; meaningful for SCHED_OTHER.
	Nice int
}

// String returns "SCHED_FIFO prio 50" or "SCHED_OTHER nice 0".
func (c Class) String() string {
	if c.Priority != 0 {
		return c.Policy + " prio " + strconv.Itoa(c.Priority)
	}
	return c.Policy + " nice " + strconv.Itoa(c.Nice)
}

func classOf(a sched.Attr) Class {
	return Class{Policy: a.Policy.String(), Priority: a.Priority, Nice: a.Nice}
}

// Class returns the scheduling class the worker's thread runs at, as
// kthread set it: the class asked for at creation (WithFIFO, WithFIFOLow,
// WithNice) or by the last setter that succeeded (SetFIFO, SetFIFOLow,
// SetNormal), or else the default, SCHED_OTHER at nice 0, which
// CreateWorker sets explicitly (one sched_setattr when the thread starts),
// so that a worker does not inherit the nice or policy of the thread that
// happened to create it.
//
// The error is nil when the thread runs the class it should. The
// exception: where the process may not lower its nice (unprivileged and
// already niced, as under `nice -n 19`), the default cannot be applied;
// the thread then keeps the class it inherited, Class returns that class
// and an error matching ErrPermission that says so and how to grant the
// privilege, and the first such worker of the process is reported, once,
// with log/slog at warning level and to the error handler. (An explicit
// class that cannot be applied fails CreateWorker instead; a replacement
// thread refused it, after runtime.Goexit, keeps serving and reports it
// here too.) After Destroy it returns the class of the last thread. Never
// blocks beyond a short lock; safe from any goroutine.
func (wk *Worker) Class() (Class, error) {
	if wk == nil || wk.fallback != nil {
		return Class{}, fmt.Errorf("kthread: class: %w: nil worker", ErrInvalidArgument)
	}
	wk.attrMu.Lock()
	defer wk.attrMu.Unlock()
	return classOf(wk.applied), wk.classErr
}

// classAppliedLocked records the outcome of giving the calling thread the
// worker's class (setErr: what sched_setattr returned, in
// sched.ThreadSetup.Apply). When the kernel refused, the thread keeps
// the class it inherited, and that is recorded; for the default class
// and a lack of privilege this is returned as warn, any other failure as
// err (CreateWorker fails with it; a replacement thread reports it and
// keeps serving). Called on the worker's thread with attrMu held.
func (wk *Worker) classAppliedLocked(setErr error) (warn, err error) {
	if setErr == nil {
		wk.applied, wk.classErr = wk.attr, nil
		return nil, nil
	}
	err = fmt.Errorf("class %s not applied: %w", classOf(wk.attr), permErr(wk.attr, setErr))
	wk.keepInheritedLocked(err)
	if !wk.dflt || !errors.Is(err, ErrPermission) {
		return nil, err
	}
	return wk.classErr, nil
}

// keepInheritedLocked records that the calling thread runs the class it
// inherited because of cause. Called on the worker's thread with attrMu
// held.
func (wk *Worker) keepInheritedLocked(cause error) {
	cur, err := sched.GetAttr(0)
	if err != nil {
		wk.applied, wk.classErr = wk.attr, fmt.Errorf("%w; its class cannot be read: %w", cause, err)
		return
	}
	wk.applied = cur
	wk.classErr = fmt.Errorf("worker %s runs the class it inherited, %s: %w", wk.name, classOf(cur), cause)
}

// defaultClassReported: the first default class that could not be
// applied has been reported (once per process: where one worker cannot
// lower its nice, none can).
var defaultClassReported atomic.Bool

func reportDefaultClass(name string, err error) {
	if !defaultClassReported.CompareAndSwap(false, true) {
		return
	}
	me := whoAmI()
	deliver(me, "log/slog", true, func() {
		report.Logger(nil).Warn("kthread: workers keep the nice they inherit (reported once)", "worker", name, "err", err)
	})
	if h := handlers.Error(nil); h != nil {
		deliver(me, "error handler", true, func() { h("kthread_create_worker", name, err) })
	}
}
