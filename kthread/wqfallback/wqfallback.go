// Package wqfallback runs a kthread.PerCPU set's items for CPUs without a
// worker on a wq workqueue, and tells the set about CPU hotplug through
// wq.OnCPUChange, as EROFS falls back on z_erofs_workqueue
// (fs/erofs/zdata.c). It is the only
// link from kthread to wq, so a program that uses kthread workers without
// a per-CPU set does not import wq.
//
//	set, err := kthread.NewPerCPU("erofs_worker", wqfallback.Queue(nil), kthread.WithFIFOLow())
package wqfallback

import (
	"errors"
	"fmt"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
)

// Queue returns a kthread.Fallback that runs items on q. With q nil, the
// set's Open allocates an UNBOUND|HIGHPRI workqueue named after the set
// with max_active = the number of online CPUs, as EROFS allocates
// z_erofs_workqueue, and
// Destroy of the set destroys it; Open then fails with an error matching
// both kthread.ErrPermission and wq.ErrPermission when the process may
// not use nice -20 (pass a workqueue of your own). A q of your own is
// left to you: destroy it after the set. Each Queue value serves one set.
func Queue(q *wq.Workqueue) kthread.Fallback { return &fallback{q: q} }

// Workqueue returns the workqueue of a Fallback made by Queue (after the
// set's Open for Queue(nil)), nil for any other Fallback.
func Workqueue(f kthread.Fallback) *wq.Workqueue {
	if fb, ok := f.(*fallback); ok {
		return fb.q
	}
	return nil
}

type fallback struct {
	q   *wq.Workqueue // set by Queue or Open; immutable after Open
	own bool          // Open allocated q; Close destroys it
}

func (f *fallback) Open(name string) error {
	if f.q != nil {
		return nil
	}
	q, err := wq.Alloc(name, wq.Unbound|wq.HighPri, max(len(wq.OnlineCPUs()), 1))
	if err != nil {
		if errors.Is(err, wq.ErrPermission) {
			err = fmt.Errorf("%w: %w", kthread.ErrPermission, err)
		}
		return err
	}
	f.q, f.own = q, true
	return nil
}

func (f *fallback) Close() {
	if f.own {
		f.q.Destroy()
	}
}

func (f *fallback) Name() string { return f.q.Name() }

// CloseWouldWait reports whether the caller runs an item of a workqueue
// that Close destroys (one Open allocated): Close would then wait for the
// caller (kthread.FallbackCloser).
func (f *fallback) CloseWouldWait() bool { return f.own && f.q.IsChainedWork() }

// item is a kthread.Work's state on a workqueue.
type item struct{ wq.Work }

func (it *item) Idle() bool { return it.Busy() == 0 }

// NewItem returns the item's state on the workqueue (a wq.Work).
func (f *fallback) NewItem() kthread.FallbackItem { return new(item) }

// Queue queues it, from NewItem of any Queue fallback, on the workqueue;
// an item of another Fallback implementation is refused.
func (f *fallback) Queue(it kthread.FallbackItem) bool {
	w, ok := it.(*item)
	if !ok {
		return false
	}
	return f.q.Queue(&w.Work)
}

func (f *fallback) OnlineCPUs() []int { return wq.OnlineCPUs() }

func (f *fallback) OnCPUChange(fn func(online []int)) (cancel func()) { return wq.OnCPUChange(fn) }
