package wq

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/measure"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqtrace"
)

// worker is one OS thread serving a pool (struct worker), or a queue's
// rescuer.
//
// Lifecycle (docs/HACKING.md, "The worker lifecycle"):
//   - birth: createWorker links it to the pool as idle with a wake token and
//     starts main on a GoLocked thread; main records the tid (setIdentity)
//     and applies the pool's affinity and class;
//   - identity: tid and self hold the thread id only while the worker's
//     goroutine owns its thread, so "am I this worker?" is one gettid and a
//     compare (onSelf). Before every item the worker checks that it is still
//     on its thread (a work function may call runtime.UnlockOSThread) with
//     sched.ThreadCheck;
//   - exit: every way out of main (dying, setup failure, runtime.Goexit in
//     a work function or a callback, a lost thread) goes through main's
//     deferred exit path, which finishes the current item exactly once,
//     unlinks the worker, hands its scheduled items back to the pool and
//     clears the identity under the pool lock.
type worker struct {
	pool   *pool        // I: the pool it serves (nil for a rescuer)
	id     int          // I
	name   string       // I
	tid    int          // L: the thread id while the thread is ours, else 0
	parker sched.Parker // S
	// I: gch is a goroutine worker's wake-up token (gopool.go); nil for a
	// thread worker.
	gch chan struct{}
	// L: leaveG forgets the worker's goroutine in gworkers; set and called
	// with the identity.
	leaveG func()

	// A: self is tid for lock-free onSelf checks; set and cleared with tid.
	self atomic.Int32
	// A: goid is the worker goroutine's id (sched.GoroutineID), set with
	// the identity, for onSelf and selfWorker; 0 if it
	// could not be read or the identity was cleared.
	goid atomic.Int64
	// W: claim is the thread's claim (sched.Claim), for ResetThreadIf.
	claim uint64
	// W: thread is the check before each item that the goroutine is still
	// on its thread (sched.ThreadCheck: exact, about 1 ns); the worker's
	// own pool Locks take the tid from it (poolMutex.LockOn).
	thread sched.ThreadCheck
	// A: curPool is the pool the worker is attached to: its pool, or for a
	// rescuer the pool it is rescuing now (nil between rescues). Written
	// under that pool's mu; a reader holding p.mu that finds curPool == p
	// may read the fields tagged L: below.
	curPool atomic.Pointer[pool]

	idle         bool                // L
	dying        bool                // L
	counted      bool                // L: counted in pool.nrRunning
	sleeping     bool                // L: seen blocked by the CM monitor
	sleptAt      int64               // L: ns when the CM monitor saw it fall asleep
	cpuIntensive bool                // L
	current      *Work               // L
	currentPwq   *pwq                // L
	bpQ          *Workqueue          // W: the queue whose MaxPending count holds the current instance until its function returns (backpressure.go)
	scheduled    workList            // L: items to run next, after the current one (non-reentrance)
	allow        []int               // W: the pool's CPUs, for repatriation
	curPwq       atomic.Pointer[pwq] // A: copy of currentPwq for Queue's non-reentrance check
	currentAt    int64               // L: ns when the current item started
	endedAt      int64               // W: ns when the last item ended (endItem)
	gen          uint64              // L: items started
	lastActive   int64               // L: ns when it last went idle

	// W: the item in progress, for the exit path.
	stage    itemStage
	starting *Work // W: the item between dequeue and startRun (grab's grabSelf check)
	runSeq   uint64
	runColor uint8
	startLat int64 // W: the dequeued instance's queue-to-start ns, observed when it starts; -1 if unknown

	// CPU accounting (measure.CPUAccounting). Reading the thread CPU clock is
	// a real system call (~0.3 us), so a worker does not read it per item,
	// nor per park: only after an item that ran at least cpuReadAfter of
	// wall time, before an item of another pwq than the one owed, and
	// after an item or before a park when cpuSettleEvery of wall time has
	// passed since the last read. Each read charges the CPU used since the
	// previous read to cpuOwe, the pwq of the items run since: short
	// items of one pwq are charged in bulk. What is owed at a park is the
	// CPU of less than cpuSettleEvery of wall time, charged at the
	// worker's next read (or its exit).
	lastPark  int64    // W: ns its last park lasted (spinOK)
	parkedAt  int64    // W: ns when it last parked, until lastPark is set from it; 0 after
	parkFrom  int64    // W: the end (ns) of the item it ran last, if it did nothing since but bookkeeping; else 0
	parkCPU   int      // L: the CPU it parked on (kick's wake_cpu hint)
	lastCPU   int64    // W: its thread CPU ns at the last read
	cpuReadAt int64    // W: ns (nanotime) of the last read
	cpuOwe    *pwq     // W: pwq to charge at the next read; nil when settled
	cpuOff    bool     // W: its last item ended with accounting off (lastCPU is stale)
	cpuAt     int64    // M: thread CPU ns at item start or wake
	seenGen   uint64   // M: the item count (gen) when the monitor last saw the worker's current item
	rescuer   *rescuer // I: non-nil for a rescuer thread

	// A: inFn is true while the worker's thread runs a work function: only
	// then does a sleeping thread mean a blocked item to the CM monitor.
	// Outside it the worker sleeps only in its own waits (the pool lock, a
	// P after the lock), which the kernel's pool spinlock never has.
	inFn atomic.Bool
	// W: scanning: counted in pool.scanners (incoming.go).
	scanning bool
	// W: a goroutine worker holds a slot (goadmit.go) since slotAt (ns),
	// counted in goAdm.inflight or (while no bound applied) free.
	slot        bool
	slotCounted bool
	slotAt      int64
	// W: its place in the slots' line and the head's poll timer, kept
	// from one wait to the next so that a wait allocates nothing (goWait).
	slotW goWaiter
	slotT *time.Timer

	// Stage stamps (park.go, stages.go), only while a recorder is set.
	stWake  atomic.Int64   // A: written by the thread that unparks the worker
	stWoken int64          // W
	stages  measure.Stages // W
	// W: pwait is the P wait (ns) of the last wake-up, not yet charged to a
	// queue while pwaitSet (park.go).
	pwait    int64
	pwaitSet bool
}

// itemStage is where the worker is with its current item.
type itemStage uint8

const (
	stageNone     itemStage = iota // no item
	stageDequeued                  // current set, PENDING not yet cleared
	stageRunning                   // startRun done: the instance runs
	stageEnded                     // endItem done; afterItem (pool bookkeeping) not yet
)

// workers maps the tid of every live worker thread (and rescuer) to its
// worker, for isChained.
var workers sched.ByThread[*worker]

// Identity: one rule, by goroutine. "Is the caller this worker?" (every
// self-wait: FlushContext, DrainContext, DestroyContext, Work.Flush,
// CancelSync, DisableSync, DelayedWork.Flush, Group.Wait, Future.Wait;
// and every attribution: isChained, grab's self check, a Group's panic
// count) is asked of the caller's goroutine, wherever it runs: a work
// function may unlock the worker's goroutine from its thread
// (runtime.UnlockOSThread as many times as the worker locked it), and it
// may then move to another thread, where it is still the worker executing
// the item, while another goroutine may run on the worker's thread. The
// goroutine lookup is exact: gworkers holds a worker's goroutine id only
// from setIdentity to clearIdentity, and goroutine ids are never reused.
// The tid registry (workers) is only the fallback for where goroutine ids
// cannot be read (sched.GoroutineID's ok false).

// selfWorker returns the worker (thread or goroutine worker, or rescuer)
// whose goroutine the caller is, or nil. Costs a goroutine id (about
// 1 ns) and a map lookup; where goroutine ids cannot be read, a gettid and
// a map lookup, and a thread worker is then found only on its thread.
func selfWorker() *worker {
	if id, ok := sched.GoroutineID(); ok {
		if wk := gworkers.Self(); wk != nil && wk.goid.Load() == id {
			return wk
		}
		return nil
	}
	if wk, ok := workers.Self(); ok && wk.onSelf() {
		return wk
	}
	return nil
}

// onSelf reports whether the caller is wk's goroutine (see Identity
// above), on whichever thread it runs. Where goroutine ids cannot be read
// (or before wk recorded its own), a thread worker is matched by its
// thread: exact, since its tid is recorded only while wk's goroutine owns
// the thread.
func (wk *worker) onSelf() bool {
	if g := wk.goid.Load(); g != 0 {
		if id, ok := sched.GoroutineID(); ok {
			return id == g
		}
	}
	if wk.gch != nil {
		return false
	}
	t := wk.self.Load()
	return t != 0 && sched.Gettid() == int(t)
}

// setIdentity records the calling thread as wk's. For a pool worker it is
// called with pool.mu held.
func (wk *worker) setIdentity(tid int) {
	wk.claim = sched.Claim()
	wk.thread.Set()
	if id, ok := sched.GoroutineID(); ok {
		wk.goid.Store(id)
	}
	wk.leaveG = gworkers.Enter(wk)
	wk.tid = tid
	wk.self.Store(int32(tid))
	workers.Enter(wk)
}

// clearIdentity forgets wk's thread. For a pool worker it is called with
// pool.mu held, before the goroutine exits (the thread dies after).
//
// The thread goes first: onSelf takes a zero goid as "could not be read"
// and trusts the thread alone, so goid is cleared only once self is.
func (wk *worker) clearIdentity() {
	workers.Leave(wk.tid, wk)
	wk.tid = 0
	wk.self.Store(0)
	if wk.leaveG != nil {
		wk.leaveG()
		wk.leaveG = nil
		wk.goid.Store(0)
	}
}

// main is the worker thread, run by sched.GoLocked: locked to an OS thread
// other than the main thread (LockDepth times) and never unlocked, because
// the thread's policy, nice and affinity are changed and it must die with
// this goroutine rather than go back to the runtime.
func (wk *worker) main() {
	p := wk.pool
	tid := sched.Gettid()
	clean := false
	defer func() {
		if !clean {
			if r := recover(); r != nil {
				panic(r) // a bug in gowq itself (user code is recovered): crash with it
			}
			// runtime.Goexit in a work function or a callback.
			wk.exitAbnormal(fmt.Errorf("%w: %s: runtime.Goexit on the worker's thread; the worker was replaced", ErrWorkerExit, wk.name))
		}
		// The worker's own thread, whichever thread the goroutine ends on:
		// a work function that unlocked the goroutine (LockDepth-1 times)
		// and then ended it with runtime.Goexit may have moved it, and the
		// thread it left is the runtime's already; unlocked and not moved,
		// the thread goes back to the runtime when the goroutine ends.
		// Give it the process's attributes (unless a newer owner claimed
		// it). Still locked to it, the thread dies and this is moot.
		_, _ = sched.ResetThreadIf(tid, wk.claim)
		p.exited.Done()
	}()
	p.mu.Lock()
	wk.setIdentity(tid)
	p.mu.Unlock()
	if err := wk.setup(p); err != nil {
		p.mu.Lock()
		p.removeWorker(wk)
		wk.clearIdentity()
		p.createFailed(err)
		p.mu.Unlock()
		clean = true
		return
	}
	wk.lastCPU, wk.cpuReadAt = sched.SelfCPUTime(), nanotime()
	wk.loop()
	clean = true
}

// setupHook, when set (tests), runs in setup between the read of the
// pool's CPUs and their application to the thread.
var setupHook atomic.Pointer[func(*pool)]

// setup names the thread and applies the pool's affinity and class. The
// class is always set, also the normal one (SCHED_OTHER, nice 0): a new
// thread inherits the nice and policy of whichever thread created it. If
// the process cannot reach the normal class's nice (unprivileged and
// already niced), the worker keeps the inherited nice; the pool records
// it (Stats().ClassError), and the first such pool of the process reports
// it to the error handler. Any other failure fails
// the creation.
func (wk *worker) setup(p *pool) error {
	p.mu.Lock()
	cpus := p.cpus
	p.mu.Unlock()
	c := p.key.class
	attr := sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice}
	if h := setupHook.Load(); h != nil {
		(*h)(p) // tests: a hotplug event between the read and the apply
	}
	r := sched.ThreadSetup{Name: wk.name, CPUs: cpus, Attr: attr}.Apply()
	if r.Affinity != nil {
		return r.Affinity
	}
	// A hotplug event between the read of p.cpus and the apply moved this
	// thread (its tid is registered: applyTopology sets it) and the apply
	// then put the old CPUs back: apply again until the CPUs set are the
	// pool's. A later event sets the thread's CPUs itself.
	for {
		p.mu.Lock()
		now := p.cpus
		p.mu.Unlock()
		if equalInts(now, cpus) {
			break
		}
		cpus = now
		if err := sched.SetAffinity(0, cpus); err != nil {
			return err
		}
	}
	err := r.Class
	if err == nil {
		return nil
	}
	if (c.rt() || c.nice < 0) && errors.Is(err, sched.ErrPermission) {
		// Failure path only: say why (a few file reads).
		return fmt.Errorf("%w: %w; %s", ErrPermission, err, sched.Explain(attr))
	}
	if c.rt() || c.nice < 0 || !errors.Is(err, sched.ErrPermission) {
		return fmt.Errorf("%w: %w", ErrPermission, err)
	}
	// The normal class, refused: we may not lower the inherited nice.
	cur, gerr := sched.GetAttr(0)
	if gerr != nil || cur.Policy != sched.PolicyNormal || cur.Nice < c.nice {
		return fmt.Errorf("%w: %w", ErrPermission, err)
	}
	first, cerr := p.keepInheritedNice(cur.Nice, err)
	if first && inheritedNiceReported.CompareAndSwap(false, true) {
		// Once per process: in a niced process every normal pool is in
		// this state, and each says so in Stats().ClassError. A notice,
		// not an error: the worker was created and runs.
		name := wk.name
		goReport(func() {
			plog().Info("workqueue: workers keep the inherited nice", "worker", name, "reason", cerr.Error())
		})
	}
	return nil
}

// keepInheritedNice records that the pool's workers run at the inherited
// nice rather than the class's (setup, when the process may not lower its
// nice): Stats().ClassError and Pools()'s Nice show it. first is true for
// the pool's first such worker; cerr is the pool's ClassError.
func (p *pool) keepInheritedNice(nice int, err error) (first bool, cerr error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	first = p.classErr == nil
	if first {
		p.classErr = fmt.Errorf("%w: workers of %v run at the inherited nice %d, not %d: the process is niced and may not lower it (needs CAP_SYS_NICE or RLIMIT_NICE): %v",
			ErrPermission, p, nice, p.key.class.nice, err)
		msg := p.classErr.Error()
		p.classErrMsg.Store(&msg)
		p.keptNice.Store(int32(nice))
		p.keptNiceSet.Store(true)
	}
	return first, p.classErr
}

// inheritedNiceReported: the first pool whose workers kept the inherited
// nice has been reported (setup); the others are not.
var inheritedNiceReported atomic.Bool

// loop is worker_thread(): park until kicked, then run items while the
// pool's concurrency management allows. It returns when the worker dies
// (reaped or pool destroyed) or loses its thread.
//
// Once woken, the worker stays awake while there is work for it: it looks
// at the pool (dying first, before each batch), runs a batch if the pool
// needs it (a goroutine worker waits for a slot first, and looks again
// after the wait), and, out of items, spins if spinOK lets it
// (trySpin) and leaves the scanners (workAtScanOff); either finding work
// sends it back to look at the pool. Then it goes idle and parks.
func (wk *worker) loop() {
	p := wk.pool
	p.mu.LockOn(&wk.thread)
	p.createFailing = false // a worker is serving: creation works again
	p.mu.Unlock()
	for {
		wk.parkIdle()
		for {
			if wk.dying {
				wk.die()
				return
			}
			p.leaveIdle(wk)
			if p.needThisWorker(wk.slot) {
				if wk.gch != nil && !wk.slot && !wk.goSlot(p) {
					continue // waited for a slot (goadmit.go)
				}
				if !wk.runBatch() {
					return // lost its thread; retired
				}
			}
			if !wk.trySpin() && !wk.workAtScanOff() {
				break
			}
		}
		wk.goIdle()
	}
}

// parkIdle parks the idle worker (park, park.go) and returns once it is
// woken, a scanner again (scanOn), with the pool lock held. Before it
// parks, the worker settles its CPU time when cpuSettleEvery has passed.
// Called with no lock held.
func (wk *worker) parkIdle() {
	// The park starts at the end of the item just run, when the worker
	// did nothing since but its bookkeeping (a few us): one clock read
	// less per item.
	t0 := wk.parkFrom
	wk.parkFrom = 0
	if t0 == 0 {
		t0 = nanotime()
	}
	if t0-wk.cpuReadAt >= int64(cpuSettleEvery) {
		wk.settleCPU(t0)
	}
	wk.park()
	// lastPark is set at the next clock read (processOne's, or the one
	// before spinOK in trySpin): a read here would be one more per item.
	wk.parkedAt = t0
	wk.scanOn()
	p := wk.pool
	if h := wakeHook.Load(); h != nil {
		(*h)(p) // tests: a woken worker that cannot get its CPU (escape_test.go)
	}
	p.mu.LockOn(&wk.thread)
}

// die is the dying worker's way out (reaped, let go under thread
// pressure, or its pool destroyed): it gives its slot and CPU time back,
// leaves the scanners and the pool, and passes on a kick it may have
// been chosen for. Called with the pool lock held; releases it.
func (wk *worker) die() {
	p := wk.pool
	wk.dropSlot()
	wk.settleCPU(0) // what is owed, before the thread is gone
	wk.scanOffLocked()
	p.removeWorker(wk)
	wk.clearIdentity()
	// A kick may have chosen this worker just before it was told to die
	// (reaped, or let go under thread pressure): pass the wake on, so
	// that no pending item is left without a worker.
	if !p.dead {
		p.kick()
	}
	p.mu.Unlock()
}

// runBatch runs the pool's items while keepWorking holds, counting in
// nrRunning meanwhile, after creating the workers workersToStart asks
// for. Called with the pool lock held; returns with it held, or false,
// with it released, when the worker lost its thread and was retired.
func (wk *worker) runBatch() bool {
	p := wk.pool
	for n := p.workersToStart(); n > 0; n-- {
		p.createWorker()
	}
	if !p.key.goro {
		p.setCounted(wk, true)
	}
	for {
		w := p.worklist.popFront()
		if r := w.runner.Load(); r != nil && r != wk && r.curPool.Load() == p && r.current == w {
			// Non-reentrance: another worker of this pool (or the
			// rescuer attached to it) runs w now; it runs w again
			// after (move_linked_works).
			r.scheduled.pushBack(w)
		} else if !wk.processOne(w) {
			return false
		}
		if !wk.processScheduled() {
			return false
		}
		if !p.keepWorking() || wk.goSlotYield(p) {
			break
		}
	}
	p.setCounted(wk, false)
	return true
}

// trySpin notes how long the last park lasted, if the worker was woken
// with no item to run, then, if spinOK lets it, spins a little instead of
// parking. It reports whether the worker has work to look at: the spin
// saw a kick, or it saw none and the pool needs this worker anyway.
// Called with the pool lock held, which it releases while it spins.
func (wk *worker) trySpin() bool {
	p := wk.pool
	if wk.parkedAt != 0 {
		wk.lastPark = nanotime() - wk.parkedAt // woken with no item to run
		wk.parkedAt = 0
	}
	if !p.spinOK(wk) {
		return false
	}
	// Items arrive faster than a park and a wake-up take (the last park
	// was short), and this thread is on a CPU other than the queuer's. A
	// kick meanwhile wakes no one (see kick): this worker takes the item.
	p.nrSpinning++
	spinners.Add(1)
	gen := p.kickGen.Load()
	p.mu.Unlock()
	wk.parkFrom = 0 // a spin is not part of the park
	found := wk.spin(p, gen)
	p.mu.LockOn(&wk.thread)
	p.nrSpinning--
	spinners.Add(-1)
	if found {
		p.spinHits.Add(1)
		return true
	}
	p.spinMisses.Add(1)
	p.spinMissed(wk)
	return !wk.dying && p.needMoreWorker()
}

// workAtScanOff leaves the scanners (incoming.go), taking what was pushed
// meanwhile, and reports whether the pool now needs this worker: then it
// is a scanner again and runs the items. Called with the pool lock held.
func (wk *worker) workAtScanOff() bool {
	p := wk.pool
	wk.scanOffLocked()
	if !wk.dying && p.needMoreWorker() {
		wk.scanOn()
		return true
	}
	return false
}

// goIdle makes wk idle: it gives its slot back, notes the CPU it parks on
// (wakeHint) and joins the pool's idle list. Called with the pool lock
// held; releases it.
func (wk *worker) goIdle() {
	p := wk.pool
	wk.dropSlot()
	wk.parkCPU = sched.GetCPU()
	p.enterIdle(wk)
	p.mu.Unlock()
}

// spin waits up to spinBudget for the pool's kick generation to move from
// gen. It reports whether it moved (an item may be waiting). No lock held.
func (wk *worker) spin(p *pool, gen uint32) bool {
	deadline := nanotime() + int64(spinBudget)
	for i := 1; ; i++ {
		if p.kickGen.Load() != gen || p.incoming.Load() != nil {
			return true
		}
		if i%64 == 0 && nanotime() >= deadline {
			return p.kickGen.Load() != gen
		}
	}
}

// processScheduled runs the worker's scheduled list until it is empty
// (process_scheduled_works). Called and returns with pool.mu held; false
// as processOne.
func (wk *worker) processScheduled() bool {
	if lockdep {
		wk.curPool.Load().assertHeld()
	}
	for !wk.scheduled.empty() {
		if !wk.processOne(wk.scheduled.popFront()) {
			return false
		}
	}
	return true
}

// processOne runs w, taken off the worklist or the scheduled list. Called
// and returns with pool.mu held (the worker's curPool); returns false,
// with the lock released, when the worker lost its thread and has been
// retired. Mirrors process_one_work.
func (wk *worker) processOne(w *Work) bool {
	p := wk.curPool.Load()
	if lockdep {
		p.assertHeld()
	}
	if wk.gch == nil && !wk.thread.Same() {
		// A work function unlocked the goroutine from its thread
		// (runtime.UnlockOSThread, LockDepth times) and it has moved since
		// (in that function or waiting for this lock): do not run w on a
		// thread without the pool's attributes. w goes back first in line.
		p.worklist.pushFront(w)
		p.mu.Unlock()
		wk.lostThread()
		return false
	}
	pq := w.pwq.Load()
	w.pwq.Store(nil)
	wk.bpQ = w.takePend() // MaxPending: the instance stays counted until its function returns (endItem)
	now := nanotime()
	if wk.parkedAt != 0 {
		wk.lastPark = now - wk.parkedAt // park, lock and dequeue: the first item after a park
		wk.parkedAt = 0
		if wk.gch != nil {
			// Once per wake-up, before the kick below: the next
			// worker woken reads the limits (goadmit.go).
			wk.goSlotStale(now)
		}
	}
	wk.current, wk.currentPwq, wk.currentAt = w, pq, now
	wk.gen++
	wk.curPwq.Store(pq)
	w.runner.Store(wk)
	if wk.rescuer == nil && pq.wq.flags&CPUIntensive != 0 {
		wk.cpuIntensive = true
		p.setCounted(wk, false)
	}
	// Chain wake-ups (kick_pool): while the pool's concurrency allows
	// another running worker (an unbound pool below its CPU count, or
	// blocking), the next pending item gets one.
	p.kick()
	if p.busy.Add(1) == 1 && !p.key.goro {
		cmNotifyBusy()
	}
	p.progress.Store(now)
	wk.startLat = -1
	if qa := w.queuedAt; qa != 0 {
		wk.startLat = now - qa // observed as it starts (runItem)
	}
	fn := w.fn
	if stagesOn() {
		wk.takeStages(w)
	}
	if p.repatriate {
		wk.allow = p.cpus
	}
	// The color of this instance: a requeue while it runs recolors w.
	wk.runColor = w.color
	wk.stage = stageDequeued
	wk.starting = w
	p.mu.Unlock()

	wk.runItem(w, fn, pq)

	if wk.gch == nil && !wk.thread.Same() {
		// The work function unlocked the goroutine and it moved: the
		// thread it left, with the pool's name, affinity and class, is the
		// Go runtime's now. Reset it and retire at once, not before the
		// next item, which may be long in coming (the worker would park
		// and ordinary goroutines would run on an RT thread meanwhile).
		wk.lostThread()
		return false
	}
	p.mu.LockOn(&wk.thread)
	wk.afterItem(wk.endedAt)
	wk.parkFrom = wk.endedAt
	return true
}

// runItem calls fn with panics recovered (runtime.Goexit is left to main's
// exit path). User code here: the tracer, fn.
func (wk *worker) runItem(w *Work, fn func(), pq *pwq) {
	// execute_start is traced before PENDING is cleared, so that a requeue's
	// queue_work can never appear before this instance's execute_start.
	t := tracer.Load()
	if t != nil {
		emit(t, &wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: int(wk.self.Load()), Comm: wk.name, Work: w.addr(), Function: w.Func(), Workqueue: pq.wq.name, Context: w.traceContext()}, nil)
	}
	// No longer between items: what was pushed lock-free since the last
	// look goes to its pwq now (and gets a worker if the pool's
	// concurrency allows), not after fn.
	wk.scanOff()
	// The stage recorder is user code: called before PENDING is cleared,
	// like execute_start, so that a runtime.Goexit in it leaves the item
	// pending for the next worker (finishCurrent, stageDequeued).
	if sr := measure.Current(); sr != nil {
		wk.recordStages(sr, w, pq.wq)
	}
	wk.runSeq = w.startRun()
	wk.starting = nil
	wk.stage = stageRunning
	// Counted as it runs, with what its dequeue measured: an instance put
	// back (stageDequeued) is counted once, by the worker that starts it.
	pq.stats.started.Add(1)
	if wk.startLat >= 0 {
		pq.stats.observeLatency(wk.startLat)
	}
	wk.chargePWait(pq) // the wake-up that led here, if measured
	if r := wk.rescuer; r != nil && r.escape {
		pq.stats.escaped.Add(1)
	} else if r != nil {
		pq.stats.rescued.Add(1)
	}
	if p := wk.curPool.Load(); p.repatriate {
		// Start inside the pod: if the scheduler left the worker outside
		// it, move it in (narrowing migrates it at once) and let it go
		// again. Last before fn: anything between the widening and fn
		// (a lock, a callback) is a chance for the scheduler to move it
		// out again.
		if !p.podSet.Has(sched.GetCPU()) && sched.SetAffinity(0, p.pod) == nil {
			_ = sched.SetAffinity(0, wk.allow)
			pq.stats.repatriated.Add(1)
		}
	}
	// One lock level is dropped while fn runs and taken again after it:
	// whatever fn does to the nesting count (runtime.UnlockOSThread any
	// number of times), the goroutine is locked to the thread it is on
	// while the worker does its own work between items: a goroutine that
	// fn unlocked but that did not move cannot leave its thread in the
	// worker's own waits (a contended pool lock would otherwise hand the
	// thread, with the pool's attributes, to other goroutines), and one
	// that moved is caught by the check in processOne. A later item runs
	// with the levels that are left, unlocked if fn took them all: if it
	// then blocks in Go and moves, the check after it retires the worker
	// and resets the thread. (kthread's loop does the same.)
	// A goroutine worker holds no lock levels: fn's own Lock/Unlock pairs
	// are its business, and a thread it leaves locked dies with it.
	thread := wk.gch == nil
	if thread {
		if o := wk.cpuOwe; o != nil && o != pq {
			// Items of another pwq ran since the last read: charge them
			// before this one adds to the clock.
			wk.settleCPU(wk.currentAt)
		}
		runtime.UnlockOSThread()
	}
	wk.inFn.Store(true)
	r, stack, panicked := callFn(fn)
	if thread {
		runtime.LockOSThread()
	}
	if panicked {
		// The panic handler is user code and part of the item: it may
		// block (the CM monitor then counts the worker as blocked) and
		// queue items (which must not be pushed for this worker while it
		// waits), so the worker is still in fn and not a scanner here.
		pq.stats.panics.Add(1)
		pi := PanicInfo{Workqueue: pq.wq.name, Func: w.Func(), Value: r, Stack: stack, Worker: wk.name, Work: w}
		pq.wq.reportPanic(pi)
	}
	wk.inFn.Store(false)
	wk.scanOn()
	wk.endItem(w, pq, t)
}

// cpuReadAfter is the wall time after which an item's end reads the
// thread CPU clock: the read then costs under 1% of the item.
const cpuReadAfter = 50 * time.Microsecond

// cpuSettleEvery bounds what a worker owes: an item's end or a park reads
// the thread CPU clock when this much wall time passed since the last
// read, so at most the CPU of this much wall time (per worker) is not yet
// in Stats().CPUTime.
const cpuSettleEvery = time.Millisecond

// settleCPU reads the thread's CPU clock and charges what was used since
// the last read to wk.cpuOwe; now is the caller's nanotime (0: read it).
// On the worker's goroutine, no lock needed. A pwq retired between the
// item and the read is charged through its queue (pwq.chargeCPU). Off
// its thread (a callback unlocked and moved the goroutine: the worker is
// retired next) the clock is another thread's, and nothing is charged:
// CPUTime never goes down.
func (wk *worker) settleCPU(now int64) {
	pq := wk.cpuOwe
	if pq == nil {
		return
	}
	if now == 0 {
		now = nanotime()
	}
	wk.cpuOwe = nil
	if wk.gch == nil && !wk.thread.Same() {
		return
	}
	c := sched.SelfCPUTime()
	pq.chargeCPU(c - wk.lastCPU)
	wk.lastCPU, wk.cpuReadAt = c, now
}

// callFn calls fn and recovers a panic. A runtime.Goexit passes through.
func callFn(fn func()) (r any, stack []byte, panicked bool) {
	defer func() {
		if panicked {
			r = recover()
			stack = stackOf()
		}
	}()
	panicked = true
	fn()
	panicked = false
	return
}

// endItem finishes the instance: stats, execute_end, flush waiters.
func (wk *worker) endItem(w *Work, pq *pwq, t *wqtrace.Tracer) {
	// Counted before flush waiters are released, so that they see it.
	end := nanotime()
	wk.endedAt = end
	pq.stats.exec.observe(end - wk.currentAt)
	if wk.gch != nil {
		// Goroutine workers are not charged CPU time (gopool.go).
	} else if !wk.thread.Same() {
		// fn unlocked the goroutine and it moved (processOne retires the
		// worker next): the caller's CPU clock is another thread's, whose
		// difference with lastCPU means nothing (it may be negative). What
		// the worker's thread used since its last read is not charged.
		wk.cpuOwe = nil
	} else if measure.CPUAccounting.Load() {
		if wk.cpuOff {
			// Accounting was off for earlier items: charge this item no
			// more than its wall time, and count from here.
			wk.cpuOff = false
			c := sched.SelfCPUTime()
			wk.lastCPU = max(wk.lastCPU, c-(end-wk.currentAt))
			wk.cpuOwe = pq
			wk.settleCPU(end)
		}
		wk.cpuOwe = pq
		if end-wk.currentAt >= int64(cpuReadAfter) || end-wk.cpuReadAt >= int64(cpuSettleEvery) {
			wk.settleCPU(end)
		}
	} else if !wk.cpuOff {
		// Accounting just went off (one read per switch): charge what is
		// owed from before this item (at most the CPU since the last read
		// less this item's wall time, which bounds its CPU), so that CPU
		// used with accounting off is charged to no queue.
		if pq := wk.cpuOwe; pq != nil {
			wk.cpuOwe = nil
			c := sched.SelfCPUTime()
			pq.chargeCPU(max(0, c-wk.lastCPU-(end-wk.currentAt)))
			wk.lastCPU, wk.cpuReadAt = c, end
		}
		wk.cpuOff = true
	}
	pq.stats.completed.Add(1)
	// The instance leaves its MaxPending count before anyone can see it
	// ended (flush waiters, a Future, a Group): room is made by then.
	wk.leaveCount()
	// The instance is done for the exit path before user code runs again.
	wk.stage = stageEnded
	w.finishRun(wk, wk.runSeq)
	if t != nil {
		emit(t, &wqtrace.Event{Kind: wqtrace.ExecuteEnd, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: int(wk.self.Load()), Comm: wk.name, Work: w.addr(), Function: w.Func()}, nil)
	}
}

// afterItem is the pool's bookkeeping after an item that ended at now
// (ns). Called with the lock of wk's curPool held.
func (wk *worker) afterItem(now int64) {
	p := wk.curPool.Load()
	pq := wk.currentPwq
	w := wk.current
	wk.stage = stageNone
	p.busy.Add(-1)
	p.progress.Store(now)
	wk.current, wk.currentPwq = nil, nil
	wk.curPwq.Store(nil)
	if w != nil && w.oneShot {
		// Nothing refers to a closure's Work any more (goapi.go).
		releaseGoItem(w)
	}
	wk.sleeping, wk.cpuIntensive = false, false
	if !p.key.goro && wk.rescuer == nil {
		p.setCounted(wk, true)
	}
	pq.stats.freed.Add(1) // with the slot, not at completion (backlogStats)
	scan := pq.complete(wk.runColor)
	// An instance still counted (its function ended by runtime.Goexit:
	// endItem did not run) leaves its MaxPending count at the latest here.
	room := wk.bpQ.unpendSlot()
	wk.bpQ = nil
	if scan || room != nil {
		p.mu.Unlock()
		if scan {
			pq.lim.scan(pq)
		}
		if room != nil {
			room.wakeRoom() // with no pool lock held
		}
		p.mu.LockOn(&wk.thread)
	}
}

// finishCurrent completes whatever item the worker holds, from any stage,
// for the exit path. Called with the curPool's lock held.
func (wk *worker) finishCurrent() {
	p := wk.curPool.Load()
	w := wk.current
	switch wk.stage {
	case stageNone:
		return
	case stageDequeued:
		// The instance never started (runtime.Goexit in the tracer's
		// execute_start): it is still pending; put it back at the head of
		// the worklist with its color.
		wk.starting = nil
		pq := wk.currentPwq
		w.runner.CompareAndSwap(wk, nil)
		w.pwq.Store(pq)
		w.pendQ, wk.bpQ = wk.bpQ, nil // pending again: its MaxPending count goes back with it
		p.worklist.pushFront(w)
		wk.stage = stageNone
		p.busy.Add(-1)
		wk.current, wk.currentPwq = nil, nil
		wk.curPwq.Store(nil)
		return
	case stageRunning:
		pq := wk.currentPwq
		pq.stats.completed.Add(1)
		wk.stage = stageEnded
		p.mu.Unlock()
		w.finishRun(wk, wk.runSeq)
		p.mu.Lock()
	}
	wk.afterItem(nanotime())
}

// exitAbnormal is the exit path of a worker whose goroutine is ending
// inside an item or a callback (runtime.Goexit): it finishes the item,
// retires the worker, lets the pool replace it, and reports err. Runs in
// main's deferred function, on the worker's goroutine, with no gowq lock
// held.
func (wk *worker) exitAbnormal(err error) {
	wk.retire()
	reportWorkerExit(wk.name, err)
}

// Worker-exit reports are rate-limited process-wide: a callback that ends
// every worker would otherwise report thousands of times a second.
var exitReports struct {
	mu     sync.Mutex
	every  time.Duration // guarded by mu: the rate limit
	at     int64         // ns of the last report
	missed int           // exits not reported since
}

func reportWorkerExit(name string, err error) {
	er := &exitReports
	er.mu.Lock()
	now := nanotime()
	if er.every == 0 {
		er.every = createReportEvery
	}
	if er.at != 0 && now-er.at < int64(er.every) {
		er.missed++
		er.mu.Unlock()
		return
	}
	if er.missed > 0 {
		err = fmt.Errorf("%w (and %d more worker exits not reported in the last %v)", err, er.missed, er.every)
	}
	er.at, er.missed = now, 0
	er.mu.Unlock()
	goReport(func() { reportError("process_one_work", name, err) })
}

// retire finishes the current item, unlinks the worker (a rescuer
// detaches), hands its scheduled items back to the pool, which gets a
// replacement worker if it needs one, and clears the worker's identity. A
// rescuer is restarted on a new thread. Called with no lock held.
func (wk *worker) retire() {
	wk.dropSlot()
	if p := wk.curPool.Load(); p != nil {
		p.mu.Lock()
		wk.finishCurrent()
		p.setCounted(wk, false)
		if wk.rescuer == nil {
			wk.scanOffLocked()
			p.removeWorker(wk)
		} else {
			wk.curPool.Store(nil)
		}
		for !wk.scheduled.empty() {
			p.worklist.pushBack(wk.scheduled.popFront())
		}
		wk.clearIdentity()
		if !p.dead {
			p.kick()
		}
		p.mu.Unlock()
	} else {
		wk.clearIdentity()
	}
	if r := wk.rescuer; r != nil {
		r.replace(wk)
	}
}

// lostThread handles a worker whose goroutine is no longer on its thread
// (a work function called runtime.UnlockOSThread LockDepth times and the
// scheduler moved it): the old thread, with the pool's name, affinity and
// class, is now the Go runtime's. It gives that thread the process's
// attributes back, retires the worker (the goroutine then ends on whatever
// thread it is on) and reports. Called before an item (none in progress)
// or right after one ended (stageEnded: retire does its bookkeeping); the
// pool lock is not held.
func (wk *worker) lostThread() {
	old := int(wk.self.Load())
	_, rerr := sched.ResetThreadIf(old, wk.claim)
	wk.retire()
	err := fmt.Errorf("%w: %s: a work function unlocked the worker's goroutine from its thread (runtime.UnlockOSThread); thread %d was reset to the process's attributes (err: %v) and the worker replaced",
		ErrWorkerExit, wk.name, old, rerr)
	reportWorkerExit(wk.name, err)
}
