package wq

import "github.com/gowq/wq/internal/measure"

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
// item it runs after the wake-up (Stats().PWait). Goroutine workers have no such wait (a goroutine that
// runs holds a P) and record none.

// parkMeasured parks wk: a goroutine worker on its channel; a thread
// worker with the stage stamps while a recorder is set, with the P-wait
// measure (sched.Parker.ParkWait: an RDTSC in the system-call window
// where the counter is the clocksource) while the figure is on, plainly
// otherwise, and in each case handing its P off first when goroutines
// may be runnable on it (handOffAtPark, park.go).
func (wk *worker) parkMeasured() {
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
	switch {
	case stagesOn():
		wk.parkStamped(handOff)
		wk.notePWait()
	case measure.PWait.Load():
		wk.pwait, wk.pwaitSet = wk.parker.ParkWait(handOff)
	case handOff:
		wk.parker.ParkHandOff()
	default:
		wk.parker.Park()
	}
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
