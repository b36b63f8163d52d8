package wq

import (
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Slots for goroutine items (docs/design.md, "Goroutine items leave the RT
// pools' Ps free"). A goroutine worker holds a process-wide slot while it
// runs items; the slots bound two things that a goroutine pool, which has
// no thread of its own, would otherwise take without limit:
//
//   - Ps reserved for RT. While any P is reserved (sched.ReserveP: an RT
//     pool, an RT kthread worker, a set of RT timer threads), goroutine
//     items run on at most GOMAXPROCS less the reserved Ps, so that a
//     woken RT thread finds an idle P instead of waiting in the Go
//     runtime's global run queue behind gowq's own goroutines. Items
//     blocked in a channel or a system call hold their slot but no P: a
//     waiter samples the runtime's count of running goroutines (at most
//     once per goCheckEvery, process-wide), and when goLiftSamples samples
//     in a row see a P beyond the reserved ones unused, the bound is lifted
//     for goLiftFor, as the kernel's unbound pools run every item while their
//     workers block. The head of the line is admitted anyway once it has
//     waited goForceAfter and no waiter was granted a slot for as long (a
//     slot given back by a worker over the bound, as after a forced
//     admission, grants none) nor did a worker of its pool start an item,
//     one per goForceAfter, so that items that wait for each other
//     progress.
//   - Threads. The Go runtime creates a thread for every goroutine that
//     blocks in a system call while others need its P, and aborts the
//     process when the creation fails. Goroutine items in flight stay
//     within the threads they may hold at the last reading
//     (readThreadsLocked): the thread gate's headroom (sched.GateHeadroom,
//     its margin kept for the runtime's own threads) plus the runtime's
//     threads that no locked goroutine and no goroutine in a system call
//     holds, plus the threads of items in system calls. Every item counts,
//     also one blocked in Go (it holds no thread now, but may enter a
//     system call at any time, before the runtime has made a thread for
//     it), and so do a forced admission and a lift of the RT bound.
//     Without a thread limit the reading is made once.
//
// A refused worker waits outside its pool's lock; the item stays on the
// worklist (cancelable, counted pending), and waiters are served first in,
// first out. While a worker of a pool waits, needMoreWorker is false for
// that pool: a held-back pool does not start a worker per queued item. A
// worker keeps its slot from item to item (per item, the give-back cost
// 40-60% of a default queue's throughput), and gives it up after
// goSlotKeep only if others wait, and at every park and exit. While no
// bound applies (no RT reservation, and the thread limits over
// goThreadsFar away at the last reading) a slot is not counted: taking it
// is two atomic loads, giving it back nothing, and a worker holding such a
// slot takes a counted one at its next item once a bound applies.

// Locks: goAdm.mu is taken after a pool lock (a worker takes or gives
// back its slot with its pool's lock held) and after ReserveP's lock (the
// reserve hook), and before the thread gate's (GateHeadroom); a waiter
// holds no lock while it waits and takes its pool's lock only with
// goAdm.mu released. Nothing under goAdm.mu calls user code.

const (
	goSlotKeep   = time.Millisecond
	goCheckEvery = 500 * time.Microsecond
	goLiftFor    = 10 * time.Millisecond
	// goLiftSamples samples in a row must see a P unused: an item that
	// makes short system calls (a few us, its P kept) is seen not running
	// now and then, independently at each sample; an item blocked for
	// milliseconds at every one.
	goLiftSamples = 8
	goForceAfter  = 10 * time.Millisecond
)

// goWaiter is a goroutine worker refused a slot.
type goWaiter struct {
	ch      chan struct{} // S: a grant, or a nudge to the new head of the line
	granted bool          // goAdm.mu
	since   int64         // I: ns when it was refused
	// mu: ns of its last mayday for its pool's rescuers (thread bound).
	maydayAt int64
}

// Sample indexes in goAdm.samples.
const (
	goSampleProcs = iota
	goSampleRunning
	goSampleNotInGo
	goSampleThreads
)

// goAdmission is the process-wide slot state (goAdm).
type goAdmission struct {
	// A: slots held: goroutine items in flight and workers between items
	// that kept theirs.
	inflight atomic.Int32
	// A: the fast path admits while inflight, its own slot included, is
	// at most limit. Written under mu.
	limit atomic.Int32
	// A: len(waiters); the fast paths look at it (written under mu).
	nWait atomic.Int32

	mu      sync.Mutex
	waiters []*goWaiter // mu: first in, first out
	// mu: slots granted whose waiter has not resumed yet: runnable
	// goroutines that are about to take a P, which a sample must not
	// count as an unused P.
	handing   int
	rtCap     int32 // mu: GOMAXPROCS less the reserved Ps; MaxInt32 while none is reserved
	reserved  int   // mu: reserved Ps at the last recompute
	thrCap    int32 // mu: from the last thread reading; MaxInt32 with no thread limit
	thrRead   bool  // mu: thrCap was read once
	thrReadAt int64 // mu: ns of the last thread reading
	liftUntil int64 // mu: ns until which the RT bound is lifted
	liftTimer *time.Timer
	checkAt   int64 // mu: ns of the last sample
	unusedRun int   // mu: samples in a row that saw a P unused
	movedAt   int64 // mu: ns when a waiter was last granted a slot (not by force)
	forcedAt  int64 // mu: ns of the last forced admission
	samples   []metrics.Sample

	// A: diagnostics (goSlotCounts).
	lifts, forced, waits, threadBound atomic.Int64
	// A: ns when a slot holder last started an item of a pool whose own
	// worker heads the line (goSlotYield): the head's items progress.
	ranAt atomic.Int64
	// A: ns of the last thread reading, for goThreadsStale.
	thrReadAtA atomic.Int64
	// A: a reading of the thread limits runs off the items' path
	// (goSlotStale).
	thrReading atomic.Bool
	// off disables the bounds (tests: the rule switched off).
	off atomic.Bool
}

var goAdm goAdmission

func init() {
	a := &goAdm
	a.rtCap = math.MaxInt32
	a.samples = []metrics.Sample{
		goSampleProcs:   {Name: "/sched/gomaxprocs:threads"},
		goSampleRunning: {Name: "/sched/goroutines/running:goroutines"},
		goSampleNotInGo: {Name: "/sched/goroutines/not-in-go:goroutines"},
		goSampleThreads: {Name: "/sched/threads/total:threads"},
	}
	sched.SetReserveHook(goRecompute)
}

// goPut gives a slot back and serves the waiters.
func goPut() {
	a := &goAdm
	a.inflight.Add(-1)
	// The waiter registers (nWait) before it looks for room, and this
	// looks for waiters after the slot is free: one of the two sees the
	// other.
	if a.nWait.Load() > 0 {
		a.mu.Lock()
		a.grantLocked()
		a.mu.Unlock()
	}
}

// goTakeSlow is goRoom's path past the fast bound: refuse while others
// wait, read the thread limits when they may have moved, then take a slot
// if the bound allows.
func goTakeSlow() bool {
	a := &goAdm
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.waiters) > 0 {
		return false
	}
	now := nanotime()
	if !a.thrRead || (a.inflight.Load() >= a.thrCap && now-a.thrReadAt >= int64(goCheckEvery)) {
		metrics.Read(a.samples)
		a.readThreadsLocked(now)
		a.setLimitLocked(now)
	}
	return a.takeLocked(false)
}

// takeLocked takes a slot if the bound allows (force: up to the thread
// bound only). Called with mu held.
func (a *goAdmission) takeLocked(force bool) bool {
	lim := a.limit.Load()
	if force {
		lim = a.thrCap
	}
	for {
		n := a.inflight.Load()
		if n >= lim {
			return false
		}
		if a.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// grantLocked hands free slots to the waiters, oldest first, and nudges
// a new head of the line so that it samples. Called with mu held.
func (a *goAdmission) grantLocked() {
	moved := false
	for len(a.waiters) > 0 && a.takeLocked(false) {
		a.grantHeadLocked()
		moved = true
	}
	if moved {
		a.movedAt = nanotime()
		if len(a.waiters) > 0 {
			a.waiters[0].signal()
		}
	}
}

// grantHeadLocked gives the head of the line the slot the caller took.
func (a *goAdmission) grantHeadLocked() {
	w := a.waiters[0]
	a.waiters[0] = nil
	a.waiters = a.waiters[1:]
	a.nWait.Add(-1)
	w.granted = true
	a.handing++
	w.signal()
}

func (w *goWaiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// setLimitLocked sets the fast path's bound: the thread bound, and the RT
// bound unless lifted. Called with mu held.
func (a *goAdmission) setLimitLocked(now int64) {
	if a.off.Load() {
		a.limit.Store(math.MaxInt32)
		return
	}
	l := a.thrCap
	if !a.thrRead {
		l = 0 // the first slot reads the limits
	}
	if now >= a.liftUntil && a.rtCap < l {
		l = a.rtCap
	}
	a.limit.Store(l)
}

// goRecompute reads the reserved Ps again and serves the waiters (after
// every ReserveP, and at the end of a lift).
func goRecompute() {
	a := &goAdm
	a.mu.Lock()
	a.rtCapLocked(runtime.GOMAXPROCS(0))
	a.setLimitLocked(nanotime())
	a.grantLocked()
	a.mu.Unlock()
}

// rtCapLocked computes the RT bound from GOMAXPROCS procs.
func (a *goAdmission) rtCapLocked(procs int) {
	a.reserved = sched.ReservedPs()
	if a.reserved == 0 {
		a.rtCap = math.MaxInt32
		return
	}
	a.rtCap = int32(max(1, procs-a.reserved))
}

// readThreadsLocked reads the thread headroom and sets the thread bound
// (the samples are read). The bound counts threads, not items: every item
// in flight may enter a system call and then hold a thread of its own,
// and the runtime needs, besides those, at most one thread per P, sysmon
// and its template thread, which the gate's margin (GateMargin: at least
// GOMAXPROCS+4) keeps. So the items may hold the threads the process may
// still create (the gate's headroom, margin subtracted), plus the
// runtime's threads that nothing else holds: its thread count less the
// threads locked by GoLocked goroutines and those of goroutines not in Go
// (in a system call or cgo call: each holds its thread; gowq's locked
// threads parked in a futex are counted once), of which those of items
// in flight are given back (at most the items in flight). The
// runtime keeps the threads it made (idle ones serve the next system
// calls), so after a burst the bound stays where it was while the gate's
// headroom is gone. Called with mu held.
func (a *goAdmission) readThreadsLocked(now int64) {
	h := sched.GateHeadroom()
	a.thrRead, a.thrReadAt = true, now
	a.thrReadAtA.Store(now)
	if h >= goThreadsFar {
		a.thrCap = math.MaxInt32
		return
	}
	a.thrCap = int32(min(max(goThreadCap(int64(h), int64(a.inflight.Load()), a.samples), 0), math.MaxInt32))
}

// goThreadCap returns how many goroutine items may be in flight: h is the
// gate's headroom (GateHeadroom), in the items in flight, s the samples
// (goSample*) read just before h. See readThreadsLocked.
func goThreadCap(h, in int64, s []metrics.Sample) int64 {
	threads := int64(sampleU(s[goSampleThreads]))
	locked := int64(sched.LockedThreads())
	// Goroutines in system calls, less gowq's locked threads parked in
	// their futex (counted with the locked ones already).
	inSys := max(0, int64(sampleU(s[goSampleNotInGo]))-min(int64(sched.ParkedThreads()), locked))
	return min(in, inSys) + h + threads - locked - inSys
}

func sampleU(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// pollLocked is the head waiter's sample, at most once per goCheckEvery
// process-wide: the thread bound is read again when it binds, an unused P
// lifts the RT bound, and a head of the line refused too long while no
// waiter was granted a slot is admitted anyway. Called with mu held.
func (a *goAdmission) pollLocked(w *goWaiter, p *pool, now int64) {
	if now-a.checkAt < int64(goCheckEvery) {
		return
	}
	a.checkAt = now
	metrics.Read(a.samples)
	procs := int(sampleU(a.samples[goSampleProcs]))
	a.rtCapLocked(procs)
	in := a.inflight.Load()
	if !a.thrRead || (a.thrCap != math.MaxInt32 && in >= a.thrCap) || now-a.thrReadAt >= int64(goThreadsReadEvery) {
		// The thread bound binds, or the reading is old: about 20 us of
		// file reads, so not at every sample of an RT-bound line.
		a.readThreadsLocked(now)
	}
	threadBound := in >= a.thrCap
	if threadBound {
		a.threadBound.Add(1)
		if now-w.since >= int64(maydayInitial) && now-w.maydayAt >= int64(maydayInterval) {
			w.maydayAt = now
			// A MemReclaim queue's items wait for threads that may not
			// come: its rescuer runs them.
			p.slotStarved.Store(true)
			goReport(p.slotMayday)
		}
	}
	if !threadBound && a.reserved > 0 && in >= a.rtCap && now >= a.liftUntil {
		// The sampler itself runs; granted waiters are about to.
		running := int(sampleU(a.samples[goSampleRunning])) - 1 + a.handing
		if procs-running > a.reserved {
			a.unusedRun++
		} else {
			a.unusedRun = 0
		}
		if a.unusedRun >= goLiftSamples {
			a.unusedRun = 0
			a.liftUntil = now + int64(goLiftFor)
			a.lifts.Add(1)
			if a.liftTimer == nil {
				a.liftTimer = time.AfterFunc(goLiftFor, goRecompute)
			} else {
				a.liftTimer.Reset(goLiftFor)
			}
		}
	}
	a.setLimitLocked(now)
	a.grantLocked()
	if !w.granted && a.waiters[0] == w && now-w.since >= int64(goForceAfter) &&
		now-max(a.movedAt, a.ranAt.Load()) >= int64(goForceAfter) && now-a.forcedAt >= int64(goForceAfter) &&
		a.takeLocked(true) {
		a.forcedAt = now
		a.forced.Add(1)
		a.grantHeadLocked()
		if len(a.waiters) > 0 {
			a.waiters[0].signal()
		}
	}
}

// goThreadsReadEvery: a goroutine pool that starts or wakes a worker
// reads the thread limits again if the last reading is older
// (goThreadsStale, goSlotStale): a limit set after a reading that found
// none (docker update --pids-limit) is seen within this, at the next
// burst.
const goThreadsReadEvery = time.Second

// goThreadsFar: with more headroom than this at a reading, no thread
// bound applies until the next reading (goThreadsStale): a second of
// worker starts cannot use it up.
const goThreadsFar = 4096

// goThreadsStale makes the next slot read the thread limits if the last
// reading is older than goThreadsReadEvery. Called when a goroutine
// worker starts (pool lock held); a load and a clock read otherwise.
func goThreadsStale() { goThreadsStaleAt(nanotime()) }

// goSlotStale is goThreadsStale for a goroutine worker that starts its
// first item after a wake-up, with processOne's clock read (now): a burst
// served by idle workers, which starts none, reads the limits too. The
// reading (tens of us of file reads) runs on a goroutine of its own, so
// that no item waits for it; the bound in force meanwhile is the last
// reading's. A load otherwise. Called with the pool lock held.
func (wk *worker) goSlotStale(now int64) {
	a := &goAdm
	if !wk.slot || now-a.thrReadAtA.Load() < int64(goThreadsReadEvery) {
		return
	}
	if !a.thrReading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer a.thrReading.Store(false)
		a.mu.Lock()
		defer a.mu.Unlock()
		now := nanotime()
		if now-a.thrReadAt < int64(goThreadsReadEvery) {
			return
		}
		metrics.Read(a.samples)
		a.readThreadsLocked(now)
		a.setLimitLocked(now)
		a.grantLocked()
	}()
}

func goThreadsStaleAt(now int64) {
	a := &goAdm
	if now-a.thrReadAtA.Load() >= int64(goThreadsReadEvery) {
		a.mu.Lock()
		if now-a.thrReadAt >= int64(goThreadsReadEvery) {
			a.thrRead = false
			a.setLimitLocked(now)
		}
		a.mu.Unlock()
	}
}

// goSlot gives wk a slot for its next item. Called with p.mu held (p is
// wk's pool, a goroutine pool). True: wk holds a slot, the lock was kept.
// False: wk waited for one outside the lock, which is held again, and
// the caller looks at the pool again (wk may hold a slot, or be dying).
func (wk *worker) goSlot(p *pool) bool {
	if lockdep {
		p.assertHeld()
	}
	if ok, counted := goRoom(); ok {
		wk.slot, wk.slotCounted, wk.slotAt = true, counted, nanotime()
		return true
	}
	p.goWaiting++
	p.mu.Unlock()
	got := wk.goWait(p)
	p.mu.Lock()
	p.goWaiting--
	if got {
		wk.slot, wk.slotCounted, wk.slotAt = true, true, nanotime()
	}
	return false
}

// goWait waits in line for a slot; false if wk was told to die first. No
// lock held.
func (wk *worker) goWait(p *pool) bool {
	a := &goAdm
	a.waits.Add(1)
	// wk's own waiter: out of the line between waits, so nobody else
	// touches it here. A nudge left in its channel by an earlier wait
	// would only cost one more look; it is drained all the same.
	w := &wk.slotW
	if w.ch == nil {
		w.ch = make(chan struct{}, 1)
	}
	select {
	case <-w.ch:
	default:
	}
	w.granted, w.since, w.maydayAt = false, nanotime(), 0
	a.mu.Lock()
	a.waiters = append(a.waiters, w)
	a.nWait.Add(1)
	a.grantLocked() // a slot given back before we were in line
	t := wk.slotT
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for !w.granted {
		head := a.waiters[0] == w
		a.mu.Unlock()
		var tc <-chan time.Time
		if head {
			if t == nil {
				t = time.NewTimer(goCheckEvery)
				wk.slotT = t
			} else {
				t.Reset(goCheckEvery)
			}
			tc = t.C
		}
		select {
		case <-w.ch:
			a.mu.Lock()
		case <-tc:
			a.mu.Lock()
			if !w.granted && a.waiters[0] == w {
				a.pollLocked(w, p, nanotime())
			}
		case <-wk.gch:
			// Told to die (pool destroyed, let go under thread pressure),
			// or a stale token.
			p.mu.Lock()
			dying := wk.dying
			p.mu.Unlock()
			a.mu.Lock()
			if dying && !w.granted {
				a.leaveLocked(w)
				a.mu.Unlock()
				p.slotStarved.Store(false)
				return false
			}
		}
	}
	a.handing--
	a.mu.Unlock()
	p.slotStarved.Store(false)
	return true
}

// leaveLocked takes w out of the line. Called with mu held.
func (a *goAdmission) leaveLocked(w *goWaiter) {
	for i, x := range a.waiters {
		if x == w {
			a.waiters = append(a.waiters[:i], a.waiters[i+1:]...)
			a.nWait.Add(-1)
			if i == 0 && len(a.waiters) > 0 {
				a.waiters[0].signal()
			}
			return
		}
	}
}

// dropSlot gives wk's slot back, if it holds one. Called on the worker's
// goroutine (pool lock held or not).
func (wk *worker) dropSlot() {
	if wk.slot {
		wk.slot = false
		if wk.slotCounted {
			goPut()
		}
	}
}

// goSlotYield reports whether wk, between two items, should give its slot
// to a waiter: it has held it goSlotKeep, someone waits, and either a
// worker of another pool waits (one of p's own would run the same
// worklist: handing it the slot would only park wk and wake it again) or
// the slots held are over the bound; or it holds a
// free slot and a bound applies now (an RT reservation was made, a lift
// ended, the thread limits came near), so that it takes a counted one
// before its next item. It gives the slot back then. Called with the pool
// lock held.
func (wk *worker) goSlotYield(p *pool) bool {
	if lockdep {
		p.assertHeld()
	}
	if wk.slot && !wk.slotCounted {
		if goAdm.limit.Load() == math.MaxInt32 {
			return false
		}
		wk.dropSlot()
		return true
	}
	// currentAt: the last item's start, a clock read processOne made.
	if !wk.slot {
		return false
	}
	a := &goAdm
	n := a.nWait.Load()
	if n == 0 {
		return false
	}
	own := n <= int32(p.goWaiting)
	if wk.currentAt-wk.slotAt >= int64(goSlotKeep) && (!own || a.inflight.Load() > a.limit.Load()) {
		// Another pool waits, or the slots are over the bound (after a
		// forced admission): the bound comes back as the holders give
		// theirs back.
		wk.dropSlot()
		return true
	}
	if own {
		// Only p's own workers wait: wk runs their items, which is
		// progress for the line's head (no forced admission).
		a.ranAt.Store(nanotime())
	}
	return false
}

// slotMayday sends a mayday to the rescuer of every queue with items on
// p's worklist, whose worker waits for a slot at the thread bound. Takes
// p.mu.
func (p *pool) slotMayday() {
	var wake []*worker
	p.mu.Lock()
	seen := map[*pwq]bool{}
	for w := p.worklist.head(); w != nil && !p.dead; w = w.next() {
		pq := w.pwq.Load()
		if pq == nil || seen[pq] {
			continue
		}
		seen[pq] = true
		if r := pq.wq.rescuer; r != nil {
			pq.stats.mayday.Add(1)
			if wk := r.mayday(pq); wk != nil {
				wake = append(wake, wk)
			}
		}
	}
	p.mu.Unlock()
	for _, wk := range wake {
		wk.unpark()
	}
}

// goSlotCounts returns the slots held, the waiters, and how many lifts,
// forced admissions, waits and thread-bound samples there were (tests,
// wqlab).
func goSlotCounts() (inflight, waiting int, lifts, forced, waits, threadBound int64) {
	a := &goAdm
	return int(a.inflight.Load()), int(a.nWait.Load()), a.lifts.Load(), a.forced.Load(), a.waits.Load(), a.threadBound.Load()
}

// setGoSlotsOff switches the bounds off (true) or on (tests: the rule
// disabled).
func setGoSlotsOff(off bool) {
	goAdm.off.Store(off)
	goRecompute()
}

// Long P waits of RT workers: the first wake-up of an RT worker that
// waited over rtPWaitWarnAfter for a Go P is logged once per process,
// with its cause and remedies.
const rtPWaitWarnAfter = time.Millisecond

var rtPWaitWarned atomic.Bool

// notePWaitRT logs the one-time warning for an RT worker's P wait of ns.
// Called by chargePWait on the worker's goroutine; logs on another
// goroutine.
func notePWaitRT(pq *pwq, ns int64) {
	if ns <= int64(rtPWaitWarnAfter) || !pq.pool.key.class.rt() || !rtPWaitWarned.CompareAndSwap(false, true) {
		return
	}
	name := pq.wq.name
	// The queue's own logger (WithLogger): the message is about it.
	go pq.wq.log().Warn("workqueue: an RT worker waited for a Go P (logged once)",
		"workqueue", name, "pwait", time.Duration(ns),
		"cause", "every P of GOMAXPROCS ran other goroutines when the RT thread woke; gowq keeps its own default queues' items off the Ps it reserves for RT, but not the program's own goroutines",
		"fix", "run CPU-bound work on a default queue (wq.Alloc without RT) or a Threads() queue instead of plain goroutines, keep the program's runnable goroutines below GOMAXPROCS, or raise GOMAXPROCS; Stats().PWait shows the wait per queue")
}
