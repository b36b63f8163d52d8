package wqtrace

import (
	"context"
	"runtime/trace"
	"strconv"
	"sync"
)

// RegionTracer is a Tracer that shows work items in `go tool trace`, using
// package runtime/trace: each execution (ExecuteStart to ExecuteEnd) becomes
// a task with one region, both named after the work function (the task
// is a child of the task of the Event's Context when it has one, as for
// items of wq's GoContext, Group and Submit), and QueueWork
// and ActivateWork become trace.Log messages in the categories
// "workqueue_queue_work" and "workqueue_activate_work".
//
// runtime/trace requires a region to end on the goroutine that started it.
// gowq emits ExecuteStart and ExecuteEnd on the same worker goroutine, which
// is locked to its thread, so the open region is kept per TID. An ExecuteEnd
// without an open region for its TID (tracing started mid-item) is ignored;
// an ExecuteStart while a region is open for its TID (an ExecuteEnd was not
// seen) ends the old region first.
//
// When runtime/trace is not running, Trace returns at once without
// allocating. It is safe for concurrent use; it takes a mutex around the
// per-TID map.
type RegionTracer struct {
	mu   sync.Mutex
	open map[int]openRegion // guarded by mu; keyed by TID
}

type openRegion struct {
	task   *trace.Task
	region *trace.Region
}

// NewRegionTracer returns a RegionTracer with no open regions.
func NewRegionTracer() *RegionTracer {
	return &RegionTracer{open: make(map[int]openRegion)}
}

// Trace records ev in the running execution trace, if any (see
// RegionTracer). It must be called on the goroutine that emitted the event.
func (t *RegionTracer) Trace(ev *Event) {
	if ev == nil {
		return
	}
	switch ev.Kind {
	case ExecuteStart:
		t.mu.Lock()
		old, had := t.open[ev.TID]
		delete(t.open, ev.TID)
		t.mu.Unlock()
		if had {
			old.region.End()
			old.task.End()
		}
		if !trace.IsEnabled() {
			return
		}
		parent := context.Background()
		if ev.Context != nil {
			parent = ev.Context // the task of the code that queued the item
		}
		ctx, task := trace.NewTask(parent, ev.Function)
		region := trace.StartRegion(ctx, ev.Function)
		t.mu.Lock()
		t.open[ev.TID] = openRegion{task: task, region: region}
		t.mu.Unlock()
	case ExecuteEnd:
		t.mu.Lock()
		r, ok := t.open[ev.TID]
		delete(t.open, ev.TID)
		t.mu.Unlock()
		if ok {
			r.region.End()
			r.task.End()
		}
	case QueueWork, ActivateWork:
		if !trace.IsEnabled() {
			return
		}
		msg := make([]byte, 0, 96)
		msg = append(msg, "work="...)
		msg = appendPtr(msg, ev.Work)
		msg = append(msg, " function="...)
		msg = append(msg, ev.Function...)
		if ev.Kind == QueueWork {
			msg = append(msg, " workqueue="...)
			msg = append(msg, ev.Workqueue...)
			msg = append(msg, " req_cpu="...)
			msg = strconv.AppendInt(msg, int64(ev.ReqCPU), 10)
			msg = append(msg, " cpu="...)
			msg = strconv.AppendInt(msg, int64(ev.TargetCPU), 10)
		}
		trace.Log(context.Background(), ev.Kind.String(), string(msg))
	}
}

// Open returns the number of executions whose region is open (started and
// not yet ended).
func (t *RegionTracer) Open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}
