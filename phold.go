package wq

import (
	"os"
	"strconv"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// yieldOn: GOWQ_QYIELD=1 (experiment).
var yieldOn = os.Getenv("GOWQ_QYIELD") == "1"

var yieldTries, yieldHits atomic.Uint64

// YieldCounts (experiment).
func YieldCounts() (tries, hits uint64) { return yieldTries.Load(), yieldHits.Load() }

var pholdIdleCheck = os.Getenv("GOWQ_PHOLD_BUSY") == "1"

// pholdNs: GOWQ_PHOLD_US (experiment).
var pholdNs = func() int64 {
	v, _ := strconv.Atoi(os.Getenv("GOWQ_PHOLD_US"))
	return int64(v) * 1000
}()

// holdP parks wk keeping its P for up to pholdNs, when wk is a thread
// worker of an RT pool and no other worker of the pool holds. It reports
// whether a token came within the hold (the park is done).
func (wk *worker) holdP() bool {
	p := wk.pool
	if pholdNs <= 0 || wk.gch != nil || wk.rescuer != nil || !p.key.class.rt() {
		return false
	}
	if pholdIdleCheck && !sched.NoIdleP() {
		return false
	}
	if !p.holding.CompareAndSwap(false, true) {
		pholdBusy.Add(1)
		return false
	}
	ok := wk.parker.Hold(pholdNs)
	p.holding.Store(false)
	if ok {
		pholdHits.Add(1)
		if stagesOn() {
			now := sched.Nanotime()
			s := &wk.stages
			wk.stWoken = now
			s.HavePNs, s.WokenNs, s.WakeNs = now, now, wk.stWake.Swap(0)
		}
		wk.pwait, wk.pwaitSet = 0, pwaitOn.Load()
	} else {
		pholdMiss.Add(1)
	}
	return ok
}

var pholdHits, pholdMiss, pholdBusy, pholdHandOff atomic.Uint64

// PHoldCounts (experiment).
func PHoldCounts() (hits, misses, busy, handoff uint64) {
	return pholdHits.Load(), pholdMiss.Load(), pholdBusy.Load(), pholdHandOff.Load()
}
