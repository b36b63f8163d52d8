package wq

import (
	"sync/atomic"

	"github.com/gowq/wq/internal/measure"
	"github.com/gowq/wq/internal/sched"
)

// Parking and waking a worker. An idle worker sleeps in one place, park,
// and is woken in one place, unpark (or unparkStamped while a stage
// recorder is set):
//
//   - a thread worker sleeps in futex_wait on its sched.Parker, handing
//     its P off first when goroutines may be runnable on it
//     (handOffAtPark), and is woken by Parker.Unpark's futex_wake;
//   - a goroutine worker (gopool.go) receives from its channel of one
//     token (worker.gch), and is woken by a send to it.
//
// park also takes the wake-up's measures for the next item: the stage
// stamps while a recorder is set (parkStamped; the item-side stamps are
// in stages.go), and the P wait below. The rescuer parks through park
// too, without either: its wake-ups are not an item's way through the
// wake path.
//
// A worker is woken for an item only after its pool lock is free
// (poolMutex.Unlock wakes the worker kick chose; QueueBatch's plug after
// its locks); a worker told to die may be woken under the lock, as it
// takes the lock next anyway. The goroutine workers' wait for a slot
// (goWait, goadmit.go) is not a park of an idle worker: such a worker
// has items to run and waits in the slots' line (it also takes a
// wake-up token sent meanwhile, to see whether it was told to die).
//
// P wait: the time from a thread worker's return from futex_wait to the
// moment its goroutine holds a P again and runs Go code. The kernel has
// woken the thread by then (an RT worker at its RT priority); what is left
// is the Go runtime's: exitsyscall finds no idle P when every P runs a
// goroutine, and the worker waits in the global run queue, which a P reads
// once every 61 scheduling rounds. While the process keeps at least as
// many goroutines runnable as it has Ps, this wait, not the kernel's
// wake-up, is an RT worker's latency (docs/deploy.md, "When RT keeps its
// latency").
//
// The worker parks with sched.Parker.ParkWait, which stamps the futex's
// return before exitsyscall (an RDTSC where the counter is the kernel's
// clocksource, else a raw clock_gettime system call, 0.1-0.5 us) and
// again once it runs; the difference is charged to the queue of the first
// item it runs after the wake-up (Stats().PWait, chargePWait). Goroutine
// workers have no such wait (a goroutine that runs holds a P) and record
// none.

// parkHandOffs counts the parks at which a worker handed its P back to the
// runtime because goroutines may have been runnable on it (tests).
var parkHandOffs atomic.Uint64

// park sleeps until wk is unparked: a goroutine worker on its channel; a
// thread worker with the stage stamps while a recorder is set, with the
// P-wait measure (sched.Parker.ParkWait: an RDTSC in the system-call
// window where the counter is the clocksource) while the figure is on,
// plainly otherwise, and in each case handing its P off first when
// goroutines may be runnable on it (handOffAtPark). The rescuer
// (wk.rescuer set) parks plainly, handing its P off likewise. On the
// worker's goroutine, no lock held.
func (wk *worker) park() {
	if wk.gch != nil {
		if stagesOn() {
			wk.parkStamped(false)
		} else {
			<-wk.gch
		}
		wk.pwaitSet = false
		return
	}
	handOff := wk.handOffAtPark()
	if wk.rescuer == nil {
		switch {
		case stagesOn():
			wk.parkStamped(handOff)
			wk.notePWait()
			return
		case measure.PWait.Load():
			wk.pwait, wk.pwaitSet = wk.parker.ParkWait(handOff)
			return
		}
	}
	if handOff {
		wk.parker.ParkHandOff()
	} else {
		wk.parker.Park()
	}
}

// unpark gives wk a wake-up token and reports whether that woke it (for a
// goroutine worker: whether the token was new). Never blocks; any
// goroutine.
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

// handOffAtPark reports whether a thread worker about to park should hand
// its P off first, and counts the hand-offs. A goroutine
// that the worker's last items readied (a channel send in a work
// function, a Flush waiter released by finishRun) sits in the worker's P,
// which a plain park keeps in the system-call state until sysmon takes it
// back (one sysmon tick, up to 10 ms on a quiet process): the worker then
// gives the P up before it sleeps. Only then, because a worker that gave
// its P up must find an idle one when it wakes, which costs the next
// item's start (internal/sched, handoff.go). On the worker's goroutine.
func (wk *worker) handOffAtPark() bool {
	handOff := sched.RunnableBehind()
	if handOff {
		parkHandOffs.Add(1)
	}
	return handOff
}

// unparkStamped is unpark with the futex_wake stamped on wk.
// Only the first wake of a park is stamped; a stamp whose Unpark issued
// no futex_wake (the worker was awake already) is taken back unless the
// worker took it meanwhile.
func (wk *worker) unparkStamped() {
	t := sched.Nanotime()
	set := wk.stWake.CompareAndSwap(0, t)
	if !wk.unpark() && set {
		wk.stWake.CompareAndSwap(t, 0)
	}
}

// parkStamped is park recording the wake-up's stages in wk.stages for
// the next item (recordStages, stages.go); a park that did not sleep
// records none. With handOff the P is given up first. On the worker's
// goroutine.
func (wk *worker) parkStamped(handOff bool) {
	wk.stWoken = 0
	switch {
	case wk.gch != nil:
		// A goroutine worker: woken is when the receive returned; there is
		// no separate "holds a P" moment (HavePNs = WokenNs).
		select {
		case <-wk.gch:
		default:
			<-wk.gch
			wk.stWoken = sched.Nanotime()
		}
	case handOff:
		wk.parker.ParkStampHandOff(&wk.stWoken)
	default:
		wk.parker.ParkStamp(&wk.stWoken)
	}
	s := &wk.stages
	s.WakeNs, s.WokenNs, s.HavePNs = 0, 0, 0
	if wk.stWoken == 0 {
		wk.stWake.Store(0)
		return
	}
	s.HavePNs = sched.Nanotime()
	s.WokenNs = wk.stWoken
	s.WakeNs = wk.stWake.Swap(0)
}

// notePWait records the P wait of the wake-up parkStamped just measured,
// for the next item (chargePWait). On the worker's goroutine.
func (wk *worker) notePWait() {
	if wk.gch != nil || wk.stWoken == 0 || !measure.PWait.Load() {
		wk.pwaitSet = false
		return
	}
	wk.pwait, wk.pwaitSet = max(0, wk.stages.HavePNs-wk.stWoken), true
}

// chargePWait adds the worker's last wake-up's P wait, if not yet
// charged, to pq. Called by runItem as the item starts (a wake-up whose
// worker puts its item back records nothing), on the worker's goroutine.
func (wk *worker) chargePWait(pq *pwq) {
	if wk.pwaitSet {
		wk.pwaitSet = false
		if measure.PWait.Load() { // it may have been turned off during the park
			pq.stats.pwait.observe(wk.pwait)
			notePWaitRT(pq, wk.pwait)
		}
	}
}
