package wq

import (
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// parkHandOffs counts the parks at which a worker handed its P back to the
// runtime because goroutines may have been runnable on it (tests).
var parkHandOffs atomic.Uint64

// park puts an idle worker to sleep until it is unparked. A goroutine
// that the worker's last items readied (a channel send in a work
// function, a Flush waiter released by finishRun) sits in the worker's P,
// which a plain park keeps in the system-call state until sysmon takes it
// back (one sysmon tick, up to 10 ms on a quiet process): the worker then
// gives the P up before it sleeps. Only then, because a worker that gave
// its P up must find an idle one when it wakes, which costs the next
// item's start (internal/sched, handoff.go). On the worker's goroutine.
func (wk *worker) park() {
	handOff := sched.RunnableBehind()
	if handOff {
		parkHandOffs.Add(1)
	}
	switch {
	case stagesOn():
		wk.parkStamped(handOff)
	case handOff:
		wk.parker.ParkHandOff()
	default:
		wk.parker.Park()
	}
}

// parkPlain is park without stage stamps, for the rescuer, whose
// wake-ups are not an item's way through the wake path.
func (wk *worker) parkPlain() {
	if sched.RunnableBehind() {
		parkHandOffs.Add(1)
		wk.parker.ParkHandOff()
		return
	}
	wk.parker.Park()
}
