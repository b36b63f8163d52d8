package wqtrace

import (
	"context"
	"strconv"
)

// Kind is one of the kernel's four workqueue tracepoints.
//
// The zero Kind is not a valid tracepoint; Trace implementations in this
// package ignore events with an invalid Kind.
type Kind uint8

const (
	// QueueWork mirrors workqueue_queue_work: a work item was queued on a
	// pool workqueue (emitted by __queue_work on the queueing thread).
	QueueWork Kind = iota + 1
	// ActivateWork mirrors workqueue_activate_work: a queued work item was
	// put on the pool's worklist, either at once or later from the inactive
	// list when max_active allowed it.
	ActivateWork
	// ExecuteStart mirrors workqueue_execute_start: a worker is about to
	// call the work function (emitted on the worker thread).
	ExecuteStart
	// ExecuteEnd mirrors workqueue_execute_end: the work function returned
	// (emitted on the same worker thread as its ExecuteStart).
	ExecuteEnd
)

// kindNames is indexed by Kind.
var kindNames = [...]string{
	QueueWork:    "workqueue_queue_work",
	ActivateWork: "workqueue_activate_work",
	ExecuteStart: "workqueue_execute_start",
	ExecuteEnd:   "workqueue_execute_end",
}

// Valid reports whether k is one of the four tracepoints.
func (k Kind) Valid() bool { return k >= QueueWork && k <= ExecuteEnd }

// String returns the kernel's tracepoint name, e.g. "workqueue_queue_work",
// or "Kind(N)" for an invalid Kind.
func (k Kind) String() string {
	if k.Valid() {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// KindOf returns the Kind whose tracepoint name is name (for example
// "workqueue_execute_start"); ok is false when name is not one of the four.
func KindOf(name string) (k Kind, ok bool) {
	for k := QueueWork; k <= ExecuteEnd; k++ {
		if kindNames[k] == name {
			return k, true
		}
	}
	return 0, false
}

// WorkCPUUnbound is the req_cpu the kernel prints when no CPU was asked for
// (WORK_CPU_UNBOUND = NR_CPUS). It is 256 on the kernels the captures in
// testdata/ktrace come from; kernels built with another NR_CPUS print another
// value, which the parser keeps as it is.
const WorkCPUUnbound = 256

// Event is one workqueue tracepoint hit, from the kernel (parsed from trace
// text) or from gowq (passed to a Tracer).
//
// An Event is a plain value; it holds no references to the work item.
// Workqueue, ReqCPU and TargetCPU are only meaningful on QueueWork; the
// parser leaves them zero on the other kinds, and sets ReqCPU and TargetCPU
// to -1 on a QueueWork line that does not carry them (a shortened line).
type Event struct {
	Kind      Kind
	TimeNs    int64   // CLOCK_MONOTONIC, ns
	CPU       int     // CPU the event happened on, -1 unknown
	TID       int     // thread id of the thread that emitted it
	Comm      string  // that thread's name, e.g. "kworker/0:1H" (may be empty)
	Work      uintptr // identity of the work item (address)
	Function  string  // work function name, e.g. "main.handle"
	Workqueue string  // queue name; set on QueueWork
	ReqCPU    int     // QueueWork: requested CPU, or WorkCPUUnbound
	TargetCPU int     // QueueWork: CPU of the chosen pool, -1 for unbound pools

	// Context is, on ExecuteStart, the context.Context the item was
	// queued with (wq's GoContext, Group.Go and Submit), nil for other
	// items and events: RegionTracer makes the execution's task a child
	// of its runtime/trace task. Recorder does not keep it; the text
	// formats do not carry it.
	Context context.Context

	// Flags is ftrace's latency-format column (irqs-off, need-resched,
	// hardirq/softirq, preempt-depth, migrate-disable), e.g. "d..1." or
	// ".....". The parser fills it from ftrace text and leaves it empty for
	// formats without the column (perf script, plain trace-cmd report);
	// FtraceWriter writes "....." when it is empty. gowq has no IRQ state
	// and leaves it empty.
	Flags string
}

// Tracer receives events synchronously on the queueing/executing thread. It
// must not block and must be safe for concurrent use.
//
// The *Event is only valid during the call: an implementation that keeps it
// must copy the value. gowq calls Trace with a zero Flags field.
type Tracer interface{ Trace(ev *Event) }

var (
	_ Tracer = (*FtraceWriter)(nil)
	_ Tracer = (*Recorder)(nil)
	_ Tracer = (*RegionTracer)(nil)
)
