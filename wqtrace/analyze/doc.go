// Package analyze turns workqueue events, from a kernel capture (parsed by
// package wqtrace) or recorded from gowq, into per-workqueue and
// per-function latency reports.
//
// Pairing. Pair follows each work item through its four tracepoints:
//
//	workqueue_queue_work -> workqueue_activate_work -> workqueue_execute_start -> workqueue_execute_end
//
// keyed by the work item's address. The kernel never has one work item
// pending twice, so an address has at most one pending instance; a work
// item may be queued again while it runs, so the running instance is kept
// apart, keyed by address and worker thread. Only queue_work carries the
// workqueue name; it is carried over to the later events. Events whose
// partner is missing (a start whose queue happened before the capture, a
// queue whose start comes after it, events lost by the ring buffer) are
// counted per kind in Unmatched and left out of the statistics.
//
// One window is ambiguous: the kernel clears PENDING before it traces
// execute_start, so a requeue's queue_work can be recorded before the
// previous instance's execute_start. The pairing then counts the older
// queue as Superseded and pairs the start with the newer queue; such
// items (rare) are left out or measured short. gowq traces execute_start
// before clearing PENDING, so its own traces do not have this window.
//
// Measures, per workqueue and per (workqueue, function), in microseconds:
//
//	queue->activate   queue_work to activate_work (time on the inactive list)
//	activate->start   activate_work to execute_start
//	queue->start      queue_work to execute_start: the "scheduling latency"
//	                  of kernel workqueue threads and bcc-style tools
//	execution         execute_start to execute_end
//
// each as count, min, p50, p90, p99, p99.9, max, avg and stdev (Stats, which
// the lab reuses for its own measurements), plus a log2 histogram of
// queue->start per workqueue, printed like bcc's runqlat.
//
// Report.WriteText prints tables sorted by count; Report.WriteJSON prints
// the same numbers for scripts.
package analyze
