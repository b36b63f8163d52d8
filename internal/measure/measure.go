// Package measure holds the switches and the stage record of gowq's
// measurement of itself: the P-wait figure, the CPU-time accounting and
// the stage recorder of the wake path. Package wq reads them on its hot
// paths (one atomic load each); the lab and the tests set them through
// internal/labsys. They are process-wide and safe from any goroutine.
package measure

import (
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// PWait turns the P-wait stamps of thread workers on (Stats().PWait).
// On by default.
var PWait atomic.Bool

// CPUAccounting turns the charging of the worker threads' CPU time to the
// queues on (Stats().CPUTime). On by default.
var CPUAccounting atomic.Bool

func init() {
	PWait.Store(true)
	CPUAccounting.Store(true)
}

// Stages are the timestamps of one work item's way from Queue to its work
// function, as handed to the recorder set by SetRecorder. Times are
// CLOCK_MONOTONIC in ns as clock_gettime(2) reads it (wqtrace events'
// TimeNs are the same clock, behind it by the constant time between two
// reads at start-up, normally under 1 us). A stage that is 0 did not
// happen for this item or was not recorded; the time up to the next
// non-zero stage then belongs to that one.
type Stages struct {
	// Work is the item, a *wq.Work; valid only during the recorder call
	// (a Go item's Work is recycled once it ran).
	Work      any
	Workqueue string // name of the queue it was queued on

	// QueueNs: the queuing thread entered the queue path, owning the
	// item's PENDING bit (__queue_work). 0 for an item that reached its
	// worklist without Queue (a flush barrier), or was queued while no
	// recorder was set.
	QueueNs int64
	// LockedNs: the queuing thread holds the lock of the item's pool, or,
	// on the lock-free path, pushes the item for a worker that is between
	// items.
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

// Recorder is the recorder set by SetRecorder, with the time it was set
// (stamps older than Since are from an earlier recording period).
type Recorder struct {
	Fn    func(*Stages)
	Since int64
}

var rec atomic.Pointer[Recorder]

// SetRecorder sets fn to receive the stage timestamps of every work item
// started by a pool worker from now on; nil stops the recording (see
// labsys.SetStageRecorder for the contract fn must keep).
func SetRecorder(fn func(*Stages)) {
	if fn == nil {
		rec.Store(nil)
		return
	}
	rec.Store(&Recorder{Fn: fn, Since: sched.Nanotime()})
}

// Current returns the recorder set, nil when none is (one atomic load).
func Current() *Recorder { return rec.Load() }

// On reports whether a recorder is set (one atomic load).
func On() bool { return rec.Load() != nil }
