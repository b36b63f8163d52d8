package wq

import (
	"sync/atomic"

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
// six stamps to the recorder. Each stage point costs one atomic load of
// stageRec when no recorder is set.

// Stages are the timestamps of one work item's way from Queue to its work
// function, as recorded by SetStageRecorder. Times are CLOCK_MONOTONIC in
// ns as clock_gettime(2) reads it (wqtrace events' TimeNs are the same
// clock, behind it by the constant time between two reads at start-up,
// normally under 1 us). A stage that is 0 did not happen for this item or
// was not recorded; the time up to the next non-zero stage then belongs
// to that one.
type Stages struct {
	Work      *Work  // the item; valid only during the recorder call
	Workqueue string // name of the queue it was queued on

	// QueueNs: the queuing thread entered the queue path, owning the
	// item's PENDING bit (__queue_work). 0 for an item that reached its
	// worklist without Queue (a flush barrier), or was queued while no
	// recorder was set.
	QueueNs int64
	// LockedNs: the queuing thread holds the lock of the item's pool, or,
	// on the lock-free path (incoming.go), pushes the item for a worker
	// that is between items.
	LockedNs int64
	// WakeNs: the thread that unparked the worker that runs the item was
	// about to issue futex_wake (at the pool lock's release). 0, as the
	// next two, when that worker was awake when the item was queued (it
	// was running an earlier item, or spinning), or was woken by a path
	// that does not stamp (the CM monitor's escaper wake, a rescuer).
	WakeNs int64
	// WokenNs: that worker's thread was back from futex_wait, before the
	// Go runtime gave it a P (exitsyscall).
	WokenNs int64
	// HavePNs: that worker held a P again and ran Go code.
	HavePNs int64
	// StartNs: the worker was about to call the work function.
	StartNs int64
}

// stageRecorder is the recorder set by SetStageRecorder, with the time it
// was set (stamps older than since are from an earlier recording period).
type stageRecorder struct {
	fn    func(*Stages)
	since int64
}

var stageRec atomic.Pointer[stageRecorder]

// SetStageRecorder sets fn to receive the stage timestamps (Stages) of
// every work item started by a pool worker from now on; nil stops the
// recording. fn is called on the worker's thread just before the work
// function, with the worker's pool lock not held; it must not block: the
// item, every item behind it on that worker's pool (of any queue sharing
// the pool), and a Destroy waiting for them, wait for it; and waiting in
// fn for work of that pool deadlocks (s.Work.Flush, a Flush of its queue:
// the item has not started yet, so no ErrDeadlock is detected). It must not
// keep the pointer, which the worker reuses for its next item: copy
// what it needs. A panic in fn is recovered and logged; a runtime.Goexit
// replaces the worker and leaves the item pending for the next one. Items
// run by a rescuer or an escaper report 0 for the wake-up's stages.
//
// Cost: with no recorder, one atomic load at each stage point (Queue, the
// wake-up, the worker's park, the item start) and no system call. With a
// recorder, a few vDSO clock reads (about 20 ns each) per item, one raw
// clock_gettime system call (0.1-0.5 us) per worker wake-up, and fn.
// Safe from any goroutine; items in flight when the recorder changes may
// report 0 for stages stamped before the change. gowq's own extension,
// for worst-case attribution (wqlab wake --explain); the kernel's
// counterpart is the workqueue tracepoints plus sched_wakeup/sched_switch.
func SetStageRecorder(fn func(*Stages)) {
	if fn == nil {
		stageRec.Store(nil)
		return
	}
	stageRec.Store(&stageRecorder{fn: fn, since: sched.Nanotime()})
}

// stagesOn reports whether a recorder is set (one atomic load).
func stagesOn() bool { return stageRec.Load() != nil }

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
func (wk *worker) recordStages(r *stageRecorder, w *Work, q *Workqueue) {
	s := &wk.stages
	s.StartNs = sched.Nanotime()
	s.Work, s.Workqueue = w, q.name
	if s.QueueNs < r.since || s.LockedNs < s.QueueNs {
		s.QueueNs, s.LockedNs = 0, 0 // queued before this recorder, or not through Queue
	}
	// A wake-up counts for this item only if the worker came back from
	// futex_wait after the item was linked (the queuer held the pool lock,
	// or pushed it); else it was awake for it. (Back between queue entry
	// and the lock, it woke for something else: the stages went backwards
	// before this compared with LockedNs.)
	if s.WokenNs < r.since || s.WokenNs < max(s.QueueNs, s.LockedNs) || s.HavePNs < s.WokenNs {
		s.WakeNs, s.WokenNs, s.HavePNs = 0, 0, 0
	}
	if s.WakeNs != 0 && (s.WakeNs < max(s.LockedNs, r.since) || s.WakeNs > s.WokenNs) {
		s.WakeNs = 0 // the futex_wake was for an earlier item
	}
	callRecorder(r.fn, s)
	*s = Stages{}
}

// callRecorder calls fn(s) with a panic recovered and logged, without
// allocating (callSafe's closure would).
func callRecorder(fn func(*Stages), s *Stages) {
	defer func() {
		if r := recover(); r != nil {
			logPanic("stage recorder")(r, stackOf())
		}
	}()
	fn(s)
}
