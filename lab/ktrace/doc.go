// Package ktrace records the Linux kernel's own workqueue tracepoints
// (workqueue_queue_work, _activate_work, _execute_start, _execute_end)
// through tracefs, so that the kernel's kworkers can be measured with the
// same analyzer (package wqtrace/analyze) as gowq.
//
// # Recording
//
// Start prepares tracefs and starts a background reader of trace_pipe;
// Session.Stop stops tracing, reads what is left, puts tracefs back as it
// was found and parses the text (package wqtrace). Record does both around
// a wait. The text is read while it is produced, every PollInterval, so
// the ring buffer overflows only when the kernel emits more than one
// buffer's worth within one interval; the kernel then prints
// "CPU:N [LOST M EVENTS]", which the parser counts.
//
// # Leaving tracefs as it was found
//
// By default a recording uses a private trace instance,
// <tracefs>/instances/gowq-<pid>-<n>, created for the recording and
// removed after it. An instance has its own ring buffer, event switches,
// tracing_on and buffer_size_kb, so nothing of the top-level tracefs state
// (its buffer contents included) is touched: a trace-cmd or perf session
// running at the same time keeps its events.
//
// Where instances are not available (an old kernel, or a directory that
// only looks like tracefs), or with Config.TopLevel, the top-level buffer
// is used, and every file the recording writes is saved first and written
// back afterwards, in reverse order: current_tracer (set to nop),
// tracing_on, buffer_size_kb (only raised, never lowered),
// events/workqueue/enable (and the four per-event enable files when the
// group was partly enabled, "X"), and the buffer itself, which is cleared
// before and after the recording. Two things cannot be put back and are
// reported in Recording.Notes instead: events that were in the top-level
// buffer before the recording (the kernel cannot take them back), and a
// boot-time buffer that was never expanded ("7 (expanded: 1408)"): enabling
// any event expands it, and it is restored to the expanded size.
//
// An instance left behind by a gowq process that was killed while
// recording (its pid no longer runs) is removed by the next recording,
// with a note.
//
// When tracefs is not mounted at /sys/kernel/tracing, Start mounts it there
// (mount -t tracefs nodev /sys/kernel/tracing) and Stop unmounts it again.
//
// Recordings of tracefs are serialised between gowq processes (and
// sessions of one process) by an flock(2) on os.TempDir()/gowq-ktrace.lock,
// so that two of them never save and restore the same state at once;
// Start waits for the lock until its context ends. (A Config.Root that is
// not a tracefs, such as a test's fake tree, is locked on the directory
// itself.)
//
// # Privileges
//
// tracefs is root-only (mode 0700) and mounting needs CAP_SYS_ADMIN.
// Without them Start returns an error wrapping ErrPermission, which says
// so; without tracefs or its workqueue events, ErrUnavailable.
//
// # Kernel activity on demand
//
// An idle machine queues little kernel work. FsyncLoad writes and fsyncs a
// temporary file every few milliseconds, so that the block layer and the
// file system queue their I/O completion work (kblockd, the ext4/jbd2
// workqueues), as in the seeds' captures in testdata/ktrace.
package ktrace
