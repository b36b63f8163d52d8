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
// once it has one (the worker's side, unparkStamped and parkStamped, is
// in park.go), and the worker stamps the item's start and hands the six
// stamps to the recorder (measure.Stages). This file holds the item's
// side. Each stage point costs one
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
