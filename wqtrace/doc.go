// Package wqtrace is the event vocabulary shared by gowq and the Linux
// kernel: the four workqueue tracepoints, as Go values and as ftrace text.
//
// The kernel's cmwq emits four tracepoints for every work item:
//
//	workqueue_queue_work     __queue_work picked a pool workqueue (pwq)
//	workqueue_activate_work  the item went onto the pool's worklist
//	                         (at once, or later from the inactive list)
//	workqueue_execute_start  a worker is about to call the work function
//	workqueue_execute_end    the work function returned
//
// gowq emits the same four, as an Event passed synchronously to a Tracer on
// the queueing or executing thread. This package provides the Tracers:
//
//   - FtraceWriter writes the kernel's exact /sys/kernel/tracing/trace text,
//     byte for byte (see AppendFtrace), so one set of tools reads both.
//   - Recorder keeps the last N events in a bounded in-memory ring.
//   - RegionTracer turns executions into runtime/trace tasks and regions for
//     `go tool trace`.
//
// Parse and Parser read the other way: ftrace text (current and older
// kernels' formats), trace-cmd report and perf script output, skipping and
// counting lines that are not workqueue events. Package
// github.com/gowq/wq/wqtrace/analyze pairs the events per work item and
// reports scheduling latency (queue to execute_start) and execution time.
//
// The package depends on the standard library only; the core package wq
// imports it, so it stays a small leaf.
//
// Properties:
//
//   - Round trip: for every valid Event e, ParseLine(AppendFtrace(e)) gives
//     e back, up to what the text carries (TimeNs truncated to us; Flags
//     "....." when empty; Workqueue, ReqCPU, TargetCPU only on QueueWork).
//   - Byte compatibility: a kernel line parsed and written again is the same
//     line (checked on the captures in testdata/ktrace).
//   - Never mis-parse silently: a line naming a workqueue tracepoint that
//     cannot be read is counted as malformed (or fails a Strict parse),
//     never returned as a wrong Event.
package wqtrace
