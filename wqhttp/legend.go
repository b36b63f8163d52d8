package wqhttp

import (
	"fmt"
	"io"
	"strings"
)

// Column names one column of the monitor table (wq_monitor.py's) or of
// the live page's pool table, and says what it shows.
type Column struct {
	Name    string // as in the table header, e.g. "CPUitsv"
	Meaning string // one or two sentences, plain text
}

// MonitorColumns are the columns of the wq_monitor.py table that
// WriteMonitorTable prints and /ui shows, in order (the name column
// first). The live page shows them as header tooltips and in its legend,
// wqmon prints them once on stderr. A "-" in a column means the counter
// does not apply to that queue. The slice is shared: do not modify it.
var MonitorColumns = []Column{
	{"workqueue", "The queue's name (the text table shows its last 24 characters)."},
	{"total", "Items started (wqmon: during the last interval unless -c; the page: since the queue was allocated)."},
	{"infl", "Items in flight now: started and not yet finished."},
	{"CPUtime", "CPU time of the queue's items, in seconds, read from each worker thread's CPU clock."},
	{"CPUitsv", "CPU-intensive items (per-CPU queues): items that ran longer than cpu_intensive_thresh (10 ms) without sleeping. Such an item stops counting for concurrency management, so its pool starts the next item on another worker. \"-\" for unbound queues."},
	{"CMW/RPR", "Per-CPU queues: CMW, concurrency-management wake-ups: a worker running an item of the queue went to sleep (blocked), and its pool woke or created another worker for the pending items. Unbound queues: RPR, repatriations: a worker that the scheduler had moved out of its pod was moved back in before it started an item."},
	{"mayday", "Mayday requests (MemReclaim queues): a pool could not create a worker in time and asked the queue's rescuer thread for help. \"-\" without MemReclaim."},
	{"rescued", "Items the rescuer thread ran (MemReclaim queues). \"-\" without MemReclaim."},
	{"ESC", "Escaped items (gowq extension, per-CPU queues with escape_after): items that no worker of their CPU started within escape_after and that ran on another CPU. \"-\" for queues that never escape."},
}

// UIColumns are the columns the live page adds to MonitorColumns.
var UIColumns = []Column{
	{"items/s", "Items started per second over the last refresh (the first figure over a quarter of a second)."},
	{"class", "The worker class the queue's workers run at: normal (SCHED_OTHER, nice 0, or the process's inherited nice when it may not lower it: see the pool table's nice), highpri (nice -20) or fifo (SCHED_FIFO). \"(fallback)\": the queue asked for a class the process may not use and got a lower one; the tooltip says why."},
	{"flags", "The flags the queue was allocated with (PERCPU, UNBOUND, HIGHPRI, RT, MEM_RECLAIM, ...)."},
}

// PoolColumns are the columns of the live page's pool table (wq_dump.py's
// pools, with their workers).
var PoolColumns = []Column{
	{"pool / worker", "A worker pool (per-CPU pools are bound to one CPU; unbound pools serve a pod of CPUs), then its worker threads, with their thread id and the CPU they last ran on."},
	{"class", "normal, highpri or fifo, as the queues' class column."},
	{"CPUs", "The CPUs the pool's workers may run on; \"strict\": unbound workers stay in their pod (affinity_strict)."},
	{"policy", "The scheduling policy of the workers: SCHED_OTHER or SCHED_FIFO."},
	{"nice / prio", "The nice the workers run at and their RT priority (0 for SCHED_OTHER). \"(asked 0)\": the class asks for another nice, which the process may not take (unprivileged under nice -n 19: the workers keep the inherited nice)."},
	{"workers", "Worker threads of the pool. A pool gets its first worker when an item is first queued to it: a pool that no queue has used on its CPU has none."},
	{"idle", "Workers parked, waiting for items. After a burst a pool keeps its idle workers for the idle timeout (300 s, as the kernel's IDLE_WORKER_TIMEOUT), then reaps those above two and a quarter of the busy ones: many idle workers after a burst of blocking items are normal."},
	{"pending", "Items queued to the pool and not yet started. Pending items next to idle workers are normal: while one worker of a per-CPU pool runs (even preempted, waiting for its CPU) the pool wakes no other (concurrency management, the kernel's need_more_worker), and a woken worker counts as idle until its thread runs."},
	{"queues", "Live workqueues that use the pool on some CPU."},
	{"state / func", "A pool's state (disassociated: its CPU went offline); a worker's current work function, or idle."},
	{"running", "How long the worker's current item has run."},
}

// ScopeColumns are the columns of the live page's affinity-scope table
// (wq_dump.py's "Affinity Scopes").
var ScopeColumns = []Column{
	{"scope", "An affinity scope of unbound queues: cpu, smt, cache_shard (the default: each last-level cache split into pods of about cache_shard_size cores with their SMT siblings), cache, numa or system."},
	{"nr_pods", "How many pods the scope divides the CPUs into; an unbound queue of that scope gets one pool per pod."},
	{"pod CPUs", "The CPUs of each pod, one list per pod."},
}

// WriteMonitorLegend writes what each column of WriteMonitorTable's table
// means, one "name: meaning" line per column, the name column excepted. It
// returns the first write error.
func WriteMonitorLegend(w io.Writer) error {
	var b strings.Builder
	for _, c := range MonitorColumns[1:] {
		fmt.Fprintf(&b, "%s: %s\n", c.Name, c.Meaning)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
