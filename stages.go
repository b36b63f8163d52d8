package wq

import (
	"github.com/gowq/wq/internal/measure"
	"github.com/gowq/wq/internal/sched"
)

// Stage timestamps of the wake path.
//
// When a recorder is set, Queue stamps the item at entry and when it holds
// the pool lock (Work.stQueue, Work.stLocked), the thread that unparks an
// idle worker stamps the worker just before its futex_wake
// (worker.stWake), the woken worker stamps its return from futex_wait
// before the Go runtime gives it a P (sched.Parker.ParkStamp) and again
// once it has one, and the worker stamps the item's start and hands the
// six stamps to the recorder (measure.Stages). Each stage point costs one
// atomic load of the recorder (measure.On) when none is set. The lab sets
// the recorder (labsys.SetStageRecorder); it is not part of wq's API.

// stagesOn reports whether a stage recorder is set (one atomic load).
func stagesOn() bool { return measure.On() }

// stampQueue stamps w at queue entry; the caller owns w's PENDING.
func (w *Work) stampQueue() {
	w.stQueue, w.stLocked = sched.Nanotime(), 0
}

// stampLocked stamps w with the pool lock held, before it is linked.
func (w *Work) stampLocked() { w.stLocked = sched.Nanotime() }

// unparkStamped is wk.parker.Unpark with the futex_wake stamped on wk.
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

// parkStamped is wk.parker.Park recording the wake-up's stages in
// wk.stages for the next item; a park that did not sleep records none.
// With handOff the P is given up first (park). On the worker's goroutine.
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

// takeStages moves w's queue-side stamps to wk.stages. Called with the
// pool lock held, between dequeue and the clearing of PENDING, so no
// queuer writes them meanwhile.
func (wk *worker) takeStages(w *Work) {
	s := &wk.stages
	s.QueueNs, s.LockedNs = w.stQueue, w.stLocked
	w.stQueue, w.stLocked = 0, 0
}

// recordStages stamps the start of w and hands wk.stages to the recorder
// r, then forgets the wake-up's stages: a later item of the same wake-up
// found its worker awake.
func (wk *worker) recordStages(r *measure.Recorder, w *Work, q *Workqueue) {
	s := &wk.stages
	s.StartNs = sched.Nanotime()
	s.Work, s.Workqueue = w, q.name
	if s.QueueNs < r.Since || s.LockedNs < s.QueueNs {
		s.QueueNs, s.LockedNs = 0, 0 // queued before this recorder, or not through Queue
	}
	// A wake-up counts for this item only if the worker came back from
	// futex_wait after the item was linked (the queuer held the pool lock,
	// or pushed it); else it was awake for it. (Back between queue entry
	// and the lock, it woke for something else: the stages went backwards
	// before this compared with LockedNs.)
	if s.WokenNs < r.Since || s.WokenNs < max(s.QueueNs, s.LockedNs) || s.HavePNs < s.WokenNs {
		s.WakeNs, s.WokenNs, s.HavePNs = 0, 0, 0
	}
	if s.WakeNs != 0 && (s.WakeNs < max(s.LockedNs, r.Since) || s.WakeNs > s.WokenNs) {
		s.WakeNs = 0 // the futex_wake was for an earlier item
	}
	callRecorder(r.Fn, s)
	*s = measure.Stages{}
}

// callRecorder calls fn(s) with a panic recovered and logged, without
// allocating (callSafe's closure would).
func callRecorder(fn func(*measure.Stages), s *measure.Stages) {
	defer func() {
		if r := recover(); r != nil {
			logPanic("stage recorder")(r, stackOf())
		}
	}()
	fn(s)
}
