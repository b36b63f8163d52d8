package wq

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Policy functions. These define how a worker pool is managed: when a
// worker is woken or created, when a running worker takes the next item,
// when an idle worker spins or is reaped (kernel/workqueue.c, "Policy
// functions"). Unless noted otherwise, they are called with the pool's
// lock (pool.mu, tag L: in pool.go's lock key) held.
//
// A worker counts in nrRunning while it runs an item of a
// concurrency-managed pool and is neither seen asleep, CPU-intensive nor a
// rescuer. Only setCounted changes that count, as only
// worker_set_flags/worker_clr_flags change nr_running in the kernel. In a
// goroutine-backed pool (poolKey.goro) no worker counts, so every pending
// item gets a worker.
//
// Each of them, setCounted included, begins with p.assertHeld() (behind
// the constant lockdep): in a build with the wqdebug tag it panics unless
// the caller holds the pool lock, as the kernel's
// lockdep_assert_held(&pool->lock); in other builds it is compiled away
// (lockcheck.go).

// concurrency is how many workers of the pool may run at once before
// concurrency management holds items back: 1 for a per-CPU pool, as in the
// kernel. The kernel does not manage unbound pools (their workers never
// count in nr_running): a kworker that cannot get a CPU waits in the run
// queue and costs nothing. A gowq worker also needs one of GOMAXPROCS Ps
// to run Go code, so while an unbound pool's items run without blocking,
// more running workers than CPUs only hand Ps to each other (each a futex
// round trip) and slow every item: the limit is then the number of CPUs
// its workers may use. Once the CM monitor sees one of its workers blocked
// (blocking), the pool runs every pending item at once, as the kernel's
// unbound pools do, until unboundBlockingHold passes with none seen
// blocked (docs/design.md, "Concurrency management"). Called from
// needMoreWorker and keepWorking; it may end an expired blocking hold.
func (p *pool) concurrency() int {
	if lockdep {
		p.assertHeld()
	}
	switch {
	case p.key.cpu >= 0:
		return 1
	case p.blocking:
		// cmSample ends the hold, but samples only busy pools: a pool
		// that went idle while blocking ends it here.
		if nanotime()-p.blockedAt <= int64(unboundBlockingHold) {
			return math.MaxInt32
		}
		p.blocking = false
	}
	return max(1, len(p.cpus))
}

// needMoreWorker: work is pending and fewer workers run than the pool's
// concurrency (need_more_worker). Called from kick, the worker loop
// (needThisWorker, trySpin, workAtScanOff), the CM monitor (cmSample,
// wakeOrCreate), maydayTimeout, createFailed and the rescuer.
func (p *pool) needMoreWorker() bool {
	if lockdep {
		p.assertHeld()
	}
	return !p.worklist.empty() && p.nrRunning < p.concurrency() && p.goWaiting == 0
}

// A goroutine pool whose worker waits for a slot (goRoom, at the end of
// this file) needs no more workers: the waiter runs the pending items
// once it has one.

// needThisWorker: the pool needs the asking worker to run its pending
// items: it needs more workers, or the worker is a goroutine worker that
// holds a slot (holdsSlot) and work is pending: the slot waiters that
// stop needMoreWorker wait for its slot, so it runs the items itself (the
// kernel's worker_thread asks need_more_worker). It takes holdsSlot, not
// the worker, and asks len, not empty, to stay within the inliner's
// budget. Called from the worker loop, woken or back from a batch.
func (p *pool) needThisWorker(holdsSlot bool) bool {
	if lockdep {
		p.assertHeld()
	}
	return p.needMoreWorker() || (holdsSlot && p.worklist.len() > 0)
}

// keepWorking: work is pending and the running workers, the caller
// included, do not exceed the pool's concurrency (keep_working). Called
// from the worker loop between items.
func (p *pool) keepWorking() bool {
	if lockdep {
		p.assertHeld()
	}
	return !p.worklist.empty() && p.nrRunning <= p.concurrency()
}

// mayStartWorking: a worker that found work may start on it without first
// creating a spare, because an idle worker is left to be woken when this
// one sleeps, or because creation keeps failing and its retries are left
// to the mayday timer (may_start_working). Called from workersToStart.
func (p *pool) mayStartWorking() bool {
	if lockdep {
		p.assertHeld()
	}
	return len(p.idle) > 0 || p.createFailing
}

// workersToStart: how many workers a worker that found work creates
// before it runs it. None when mayStartWorking holds. Otherwise one, an
// idle worker to wake when this one sleeps (may_start_working/
// manage_workers); two in a goroutine pool with more than two items
// pending: such a pool has no CM to start workers for blocked items, so a
// burst reaches its items through these starts, and two per start make
// the chain a tree (docs/decisions.md, "Goroutine pools: two new workers
// per start"). Called from the worker loop (runBatch).
func (p *pool) workersToStart() int {
	if lockdep {
		p.assertHeld()
	}
	switch {
	case p.mayStartWorking():
		return 0
	case p.key.goro && p.worklist.len() > 2:
		return 2
	}
	return 1
}

// needToCreate: a worker is needed and none is idle to be woken
// (need_to_create_worker). Called from maydayTimeout and the rescuer.
func (p *pool) needToCreate() bool {
	if lockdep {
		p.assertHeld()
	}
	return p.needMoreWorker() && len(p.idle) == 0
}

// wakeHint picks the idle worker to wake: the most recently idle one
// (LIFO, warm caches), except that an unbound pool prefers, among its few
// most recent idle workers, one that parked on the queuer's CPU. The
// kernel hints a woken kworker onto the queueing CPU (wake_cpu); user
// space cannot, but a thread is woken on the CPU it last ran on when that
// is allowed, so waking the worker that parked there has it preempt the
// queuer's CPU at once instead of waking another, idle, CPU (an IPI, and
// in a virtual machine an exit of the idle vCPU). Called from kick, with
// idle non-empty.
func (p *pool) wakeHint() int {
	if lockdep {
		p.assertHeld()
	}
	n := len(p.idle)
	if p.key.cpu >= 0 || p.lastQueueCPU < 0 {
		return n - 1
	}
	for i := n - 1; i >= 0 && i >= n-4; i-- {
		if p.idle[i].parkCPU == p.lastQueueCPU {
			return i
		}
	}
	return n - 1
}

// cmWakeHint picks the idle worker that the CM monitor wakes (wakeOrCreate,
// for a worker seen asleep, blocking or CPU-intensive): the most recently
// idle one (LIFO, warm caches), without wakeHint's preference for the
// queuer's CPU. That preference pays when a queuer's kick wakes the
// worker on the CPU that queued the item just now; the monitor wakes a
// worker a tick or more after the queuing, from its own thread, to stand
// in for a worker that stopped running, and the queuer's CPU is then no
// better placed than another: waking the worker parked there would only
// preempt whatever runs on it now. Called from wakeOrCreate, with idle
// non-empty.
func (p *pool) cmWakeHint() int {
	if lockdep {
		p.assertHeld()
	}
	return len(p.idle) - 1
}

// tooManyWorkers mirrors too_many_workers(): more than two idle workers
// and idle workers at least a quarter of the busy ones: the idle-reap
// test. Called from enterIdle (to arm the idle timer) and reapIdle.
func (p *pool) tooManyWorkers() bool {
	if lockdep {
		p.assertHeld()
	}
	nIdle := len(p.idle)
	nBusy := len(p.workers) - nIdle
	return nIdle > 2 && (nIdle-2)*4 >= nBusy
}

// Spinning before parking. A worker that has
// just drained its pool spins for at most spinBudget, watching the pool's
// kick generation, instead of parking in futex_wait, when all of these
// hold:
//   - its class is not RT: a SCHED_FIFO spinner would starve every
//     ordinary thread of its CPU for the budget;
//   - the pool may use at least two CPUs and the worker is not on the CPU
//     of the pool's last queuer, so the spin never delays the queuing
//     thread on its own CPU (per-CPU pools therefore never spin);
//   - its last park lasted less than spinAfterPark: items come faster
//     than a park and a wake-up would take, so a spin is likely to catch
//     the next one; sparse items cost no spinning;
//   - no other worker of the pool spins, and fewer than GOMAXPROCS/2
//     workers spin in the process (each spinner holds a P).
//
// A caught item starts with no futex wake-up, no context switch and no
// P hand-off. The spinning costs at most spinBudget of CPU per drain.
const (
	spinBudget    = 20 * time.Microsecond
	spinAfterPark = int64(4 * spinBudget)
)

// spinners counts the workers spinning now, process-wide.
var spinners atomic.Int32

// spinOK reports whether wk may spin before parking: the spin rule above.
// Called from the worker loop when it runs out of items, with the worker
// not idle.
func (p *pool) spinOK(wk *worker) bool {
	if lockdep {
		p.assertHeld()
	}
	if wk.dying || p.dead || !p.mayspin || len(p.cpus) < 2 || p.nrSpinning > 0 ||
		wk.lastPark >= spinAfterPark || wk.rescuer != nil {
		return false
	}
	if int(spinners.Load()) >= max(1, runtime.GOMAXPROCS(0)/2) {
		return false
	}
	// An unknown queuer CPU (no cheap way to read it here) rules spinning
	// out: it might be this one.
	return p.lastQueueCPU >= 0 && sched.GetCPU() != p.lastQueueCPU
}

// spinnerTakes: a worker of the pool spins (trySpin) and takes the item a
// kick is for: the kick wakes no one. Called from kick, after it moved the
// kick generation the spinner watches.
func (p *pool) spinnerTakes() bool {
	if lockdep {
		p.assertHeld()
	}
	return p.nrSpinning > 0
}

// spinMissed notes a spin that saw no kick: wk spins no more before a
// park shorter than spinAfterPark (spinOK's last-park rule) shows items
// coming fast again. Called from trySpin.
func (p *pool) spinMissed(wk *worker) {
	if lockdep {
		p.assertHeld()
	}
	wk.lastPark = spinAfterPark
}

// setCounted makes wk count in nrRunning (on) or not, and reports whether
// that changed anything (worker_set_flags/worker_clr_flags adjusting
// nr_running). Called from the worker loop, processOne, afterItem and
// retire, and from the CM monitor (cmSample).
func (p *pool) setCounted(wk *worker, on bool) bool {
	if lockdep {
		p.assertHeld()
	}
	if wk.counted == on {
		return false
	}
	wk.counted = on
	if on {
		p.nrRunning++
	} else {
		p.nrRunning--
	}
	return true
}

// The goroutine slots' rule. Unlike the predicates above it is
// process-wide and takes no pool lock: a goroutine worker asks it (goSlot,
// goadmit.go) before it runs items, pool lock held or not. It bounds the
// goroutine items that run at once: while Ps are reserved for RT, at most
// GOMAXPROCS less the reserved Ps (lifted while items blocked outside Go
// leave a P unused), and never more than the thread limits leave room for
// (goadmit.go, "Slots for goroutine items").

// goRoom reports whether a goroutine item may start now without waiting:
// no earlier waiter, and a slot under the bound. Takes the slot when it
// reports true: counted (counted true), or, while no bound applies, a free
// one that is not counted, so that the default queues pay one load, not a
// shared counter, per wake-up. It reads the atomics goAdm.limit, goAdm.nWait
// and goAdm.inflight, and takes goAdm.mu only past the fast bound
// (goTakeSlow). Any goroutine; the pool lock may be held (goAdm.mu nests
// under it).
func goRoom() (ok, counted bool) {
	a := &goAdm
	if a.limit.Load() == math.MaxInt32 && a.nWait.Load() == 0 {
		return true, false
	}
	return goRoomCounted(), true
}

// goRoomCounted is goRoom's counted slot: one under the bound while
// nobody waits, else goTakeSlow's.
func goRoomCounted() bool {
	a := &goAdm
	if a.nWait.Load() == 0 {
		if a.inflight.Add(1) <= a.limit.Load() {
			return true
		}
		goPut()
	}
	return goTakeSlow()
}
