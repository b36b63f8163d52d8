package kthread

import (
	"sync"

	"github.com/gowq/wq/internal/sched"
)

// Identity: "does the caller act for this worker?" decides whether a wait
// would wait for the caller itself (FlushWork, CancelWorkSync,
// FlushWorker and Destroy then return ErrDeadlock instead of hanging).
//
// The caller acts for a worker when it is the worker's loop goroutine
// (which runs the work functions) or a helper goroutine that runs a user
// handler on behalf of a goroutine that acts for the worker (see
// deliver). Goroutines are identified by their id, which the runtime
// never reuses; thread ids would not do: tids are reused, a handler runs
// on a helper goroutine's thread, and a work function that unlocks its
// goroutine from the worker's thread may move to another thread.

// actors maps the id of each worker loop goroutine, and of each helper
// goroutine acting for one, to the worker. Entries live from the
// goroutine's start until it exits. sync.Map: int64 -> *Worker.
var actors sync.Map

// actingFor returns the worker the calling goroutine acts for, or nil.
// It costs about 2 us (see sched.GoroutineState); it is called only on
// paths that are about to block or to report an error.
func actingFor() *Worker {
	g, _, ok := sched.GoroutineState()
	if !ok {
		return nil
	}
	if v, ok := actors.Load(g); ok {
		return v.(*Worker)
	}
	return nil
}

// self reports whether the calling goroutine acts for wk.
func (wk *Worker) self() bool { return actingFor() == wk }
