package wq

import (
	"context"
	"sync/atomic"
	"time"
)

// DelayedWork is a work item with a timer, as struct delayed_work is: it is
// queued when its delay expires. It embeds Work, so Pending, Busy, Cancel,
// CancelSync, Disable, DisableSync and Enable apply to it directly and also
// stop its timer. Usable after Init; must not be copied after first use.
type DelayedWork struct {
	Work

	timer *time.Timer               // created by Init; fires timerFn
	wq    atomic.Pointer[Workqueue] // target of the armed timer
	cpu   atomic.Int32              // requested CPU of the armed timer, or cpuUnbound
}

// Init sets the function and resets the item. It mirrors INIT_DELAYED_WORK.
// The item must be idle (not pending, not running).
func (dw *DelayedWork) Init(fn func()) {
	dw.Work.Init(fn)
	dw.Work.dw = dw
	if dw.timer == nil {
		dw.timer = time.AfterFunc(time.Hour, dw.timerFn)
		dw.timer.Stop()
	}
}

// NewDelayedWork returns an initialised DelayedWork that runs fn.
func NewDelayedWork(fn func()) *DelayedWork {
	dw := &DelayedWork{}
	dw.Init(fn)
	return dw
}

func (dw *DelayedWork) stopTimer() bool { return dw.timer != nil && dw.timer.Stop() }

// timerFn runs on the Go timer's goroutine when the delay expires, with
// PENDING still owned by the armed instance. Mirrors delayed_work_timer_fn.
func (dw *DelayedWork) timerFn() {
	q := dw.wq.Load()
	q.queuePended(int(dw.cpu.Load()), &dw.Work)
}

// arm queues the pending item after d on q (cpu may be cpuUnbound).
// PENDING must be owned by the caller. Mirrors __queue_delayed_work.
func (dw *DelayedWork) arm(q *Workqueue, cpu int, d time.Duration) {
	if d <= 0 {
		q.queuePended(cpu, &dw.Work)
		return
	}
	if cpu == cpuUnbound && !q.unbound {
		// A per-CPU queue keeps the locality of the queueing CPU, as a
		// timer armed on the local CPU does.
		cpu = currentCPU()
	}
	dw.wq.Store(q)
	dw.cpu.Store(int32(cpu))
	dw.timer.Reset(d)
}

// Flush queues the item at once if its timer is armed and then waits like
// Work.Flush. It returns true if it waited. Mirrors flush_delayed_work().
func (dw *DelayedWork) Flush() bool {
	ok, _ := dw.FlushContext(context.Background())
	return ok
}

// FlushContext is Flush bounded by ctx; see Work.FlushContext.
func (dw *DelayedWork) FlushContext(ctx context.Context) (bool, error) {
	if dw.stopTimer() {
		dw.wq.Load().queuePended(int(dw.cpu.Load()), &dw.Work)
	}
	return dw.Work.FlushContext(ctx)
}
