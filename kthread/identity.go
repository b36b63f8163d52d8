package kthread

import "github.com/gowq/wq/internal/sched"

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
// goroutine running a user callback (deliver), to an actor. Entries live
// from the goroutine's start until it exits.
var actors sched.ByGoroutine[actor]

// actor is what a goroutine in actors is.
type actor struct {
	wk *Worker // the worker the goroutine acts for, or nil
	// errorHandler: a helper running the error handler (or the slog
	// default); errors it causes are not delivered to it again.
	errorHandler bool
}

// whoAmI returns the calling goroutine's entry in actors (zero if none):
// a goroutine id (sched.GoroutineID) and a map lookup.
func whoAmI() actor { return actors.Self() }

// actingFor returns the worker the calling goroutine acts for, or nil.
func actingFor() *Worker { return whoAmI().wk }

// self reports whether the calling goroutine acts for wk.
func (wk *Worker) self() bool { return actingFor() == wk }
