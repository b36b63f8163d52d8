package wq

import (
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// parkHandOffs counts the parks at which a worker handed its P back to the
// runtime because goroutines may have been runnable on it (tests).
var parkHandOffs atomic.Uint64

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

// parkPlain parks a thread worker without stage stamps or the P-wait
// measure, for the rescuer, whose wake-ups are not an item's way through
// the wake path; it hands the P off as parkMeasured does.
func (wk *worker) parkPlain() {
	if wk.handOffAtPark() {
		wk.parker.ParkHandOff()
		return
	}
	wk.parker.Park()
}
