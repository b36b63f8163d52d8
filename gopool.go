package wq

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// Goroutine-backed pools (docs/design.md, "Goroutine-backed pools").
//
// An unbound or ordered pool whose attributes are the process's own (the
// normal class at nice 0 or at the nice of every thread the runtime may run
// the items on: goroutineBacked; a cpumask covering every CPU the process
// may use, not strict) has nothing to set on a thread, so
// its workers are plain goroutines: they park on a channel of their own
// and a wake-up is a goroutine hand-off (the woken goroutine goes to the
// waker's P, no system call). Everything above the worker (pwqs,
// max_active, flush colors, non-reentrance, ordering, keyed chains,
// delayed work, the rescuer, Stats, tracer, stage recorder) is shared
// with thread-backed pools; the worker runs the same loop. What differs:
//   - start: `go` instead of sched.GoLocked, no thread setup, no thread
//     headroom check (a goroutine needs no thread of its own);
//   - park and wake: a buffered channel of one token instead of the futex
//     Parker;
//   - the pool lock is a sync.Mutex (a waiting goroutine parks through
//     the Go scheduler and its thread runs other goroutines);
//   - no concurrency management and no CM monitor: a blocked goroutine
//     holds no P (the runtime hands it on), so, as the kernel's unbound
//     pools, the pool wakes or starts a worker for every pending item;
//   - no spinning before parking and no repatriation (there is no thread
//     to pin);
//   - identity is the goroutine id (sched.ByGoroutine), never reused; the
//     tid is 0;
//   - no per-item CPU accounting: a goroutine's thread runs other
//     goroutines too, and the Go runtime has no per-goroutine CPU clock;
//     Stats' CPU time is 0 for such pools (the exec-time histogram stays).

// forceThreads makes every pool thread-backed (environment GOWQ_THREADS=1,
// read once at start, or setForceThreads in tests): the suite runs once
// with default queues on goroutines and once on threads.
var forceThreads atomic.Bool

func init() {
	if v := os.Getenv("GOWQ_THREADS"); v != "" && v != "0" {
		forceThreads.Store(true)
	}
}

// gworkers maps the goroutine id of every worker (goroutine and thread
// workers, rescuers) to it, from setGoIdentity or setIdentity to
// clearIdentity: selfWorker's lookup (worker.go, "Identity").
// nGoWorkers counts the goroutine workers.
var (
	gworkers   sched.ByGoroutine[*worker]
	nGoWorkers atomic.Int32
)

// goroutineBacked reports whether an unbound pool with these attributes
// gets goroutine workers: class normal, allow covering every CPU the
// process may use (online), not strict, neither the queue (Threads) nor
// the process (GOWQ_THREADS) asked for threads, and a nice that holds on
// every thread the items may run on. Nice 0, the normal class's, always
// qualifies: a default queue's items run on the runtime's threads,
// niced or not, as every goroutine does (and a thread worker of a niced
// unprivileged process could not get nice 0 either). Another nice
// qualifies only when every thread on which the Go runtime may run the
// items has it (sched.RuntimeNice: every thread but gowq's own locked
// ones): a process started with nice -n 5 has it on all; a renice -p of
// the main thread alone does not. Called with q.mu held, once per table
// install: threads reniced later do not move a queue (an attribute
// write or hotplug reads them again).
func (q *Workqueue) goroutineBacked(allow, online topology.CPUSet) bool {
	if q.threads || forceThreads.Load() || q.attrs.strict {
		return false
	}
	c := q.attrs.class
	if c.policy != sched.PolicyNormal || !allow.Equal(online) {
		return false
	}
	if c.nice == 0 {
		return true
	}
	nice, uniform := runtimeNice()
	return uniform && nice == c.nice
}

// runtimeNice is sched.RuntimeNice (tests replace it).
var runtimeNice = sched.RuntimeNice

// GoroutineBacked reports whether q's items are run by goroutine workers
// (its attributes are the process's own and no Threads option or
// GOWQ_THREADS asked for threads), as of its current attributes. Safe
// from any goroutine; never blocks.
func (q *Workqueue) GoroutineBacked() bool {
	t := q.table.Load()
	return t != nil && t.dfl != nil && t.dfl.pool.key.goro
}

// startGoWorker starts wk as a goroutine worker. Called with p.mu held.
func (p *pool) startGoWorker(wk *worker) {
	if lockdep {
		p.assertHeld()
	}
	wk.gch = make(chan struct{}, 1)
	wk.gch <- struct{}{} // the token: its first park returns at once
	nGoWorkers.Add(1)
	goThreadsStale()
	go wk.gmain()
}

// gmain is a goroutine worker: main without a thread. Every way out goes
// through the same exit path as a thread worker's (retire).
func (wk *worker) gmain() {
	p := wk.pool
	clean := false
	defer func() {
		if !clean {
			if r := recover(); r != nil {
				panic(r) // a bug in gowq itself (user code is recovered): crash with it
			}
			// runtime.Goexit in a work function or a callback.
			wk.exitAbnormal(fmt.Errorf("%w: %s: runtime.Goexit on the worker's goroutine; the worker was replaced", ErrWorkerExit, wk.name))
		}
		nGoWorkers.Add(-1)
		p.exited.Done()
	}()
	p.mu.Lock()
	wk.setGoIdentity()
	p.mu.Unlock()
	wk.loop()
	clean = true
}

// setGoIdentity records the calling goroutine as wk's. Called with
// pool.mu held.
func (wk *worker) setGoIdentity() {
	if id, ok := sched.GoroutineID(); ok {
		wk.goid.Store(id)
	}
	wk.leaveG = gworkers.Enter(wk)
}

// unpark gives wk a wake-up token and reports whether that woke it (for a
// goroutine worker: whether the token was new). Never blocks.
func (wk *worker) unpark() bool {
	if wk.gch != nil {
		select {
		case wk.gch <- struct{}{}:
			return true
		default:
			return false
		}
	}
	return wk.parker.Unpark()
}

// lockNoDrain takes the pool lock without draining the incoming stack
// (tests: a push that comes after the drain).
func (pm *poolMutex) lockNoDrain() {
	switch {
	case pm.goro:
		pm.gm.Lock()
	case pm.pi:
		pm.pm.Lock()
	default:
		pm.m.Lock()
	}
	pm.held.set()
}
