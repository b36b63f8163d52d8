// Package kthread brings the Linux kernel's kthread_worker API
// (include/linux/kthread.h, kernel/kthread.c) to Go: a Worker is one
// dedicated OS thread, with its own name, CPU affinity and scheduling class,
// that runs the work items queued on it one at a time, in queue order.
// Where package wq shares pools of workers between queues and manages
// their concurrency, a kthread Worker is a single private thread: the tool
// for latency-critical work that must not wait behind anybody else's, as
// EROFS runs decompression on per-CPU SCHED_FIFO kthread workers instead
// of an UNBOUND|HIGHPRI workqueue (CONFIG_EROFS_FS_PCPU_KTHREAD).
//
// # Design
//
// A Worker's thread is started with internal/sched.GoLocked: a goroutine
// locked to an OS thread other than the main thread and never unlocked, so
// the name, affinity (CreateWorkerOnCPU) and class (WithFIFO, WithFIFOLow,
// WithNice, SetFIFO, SetFIFOLow, SetNormal) set on that thread die with it
// and never leak into unrelated goroutines. Every worker's class is set
// explicitly when its thread starts, SCHED_OTHER at nice 0 by default, so
// that it does not inherit the nice or policy of whichever thread created
// it (Worker.Class reports the class applied, and the one exception: a
// process that may not lower its nice keeps it, reported once).
//
// # Thread lifecycle and identity
//
//   - Birth: the thread names itself, binds to its CPU, applies the class
//     and records itself (TID) before it serves; CreateWorker returns
//     after that.
//   - Identity: a tid is recorded only while the worker's goroutine owns
//     the thread, and is cleared, under the lock the setters take around
//     their system call, in the thread's top frame before the goroutine
//     exits. So TID never names a dead or foreign thread (it reads 0 after
//     Destroy and while a replacement starts), and a setter never acts on
//     a stale tid. "Is the caller this worker?", which turns waits that
//     would wait for the caller into ErrDeadlock, compares goroutines, not
//     thread ids or names (tids are reused, names repeat): the worker's
//     goroutine, and helper goroutines running a handler on its behalf.
//   - Exit: Destroy, or a work function that called runtime.Goexit (the
//     goroutine exits locked and the runtime destroys the thread; a
//     replacement thread with the same name, affinity and class takes
//     over, ErrGoexit is reported).
//   - Stray runtime.UnlockOSThread in a work function: the goroutine is
//     locked sched.LockDepth (64) times, and the worker loop holds a lock
//     level of its own outside work functions, so it parks, waits and
//     exits locked whatever an item did, and fewer than 64 calls change
//     nothing. A work function that unlocks 64 times and then leaves the
//     thread (it blocks or is preempted and the Go scheduler moves it) is
//     caught by a gettid after the item: the thread gets the process's
//     name, affinity and class back (as far as the process may: a raised
//     nice stays without CAP_SYS_NICE), the worker continues on a
//     replacement thread and ErrThreadEscaped is reported. What the
//     thread ran in between, while that work function was still running,
//     cannot be undone.
//
// # Callbacks
//
// The panic handler, the error handler and the log/slog default (whose
// handler is user code too) run on a helper goroutine that the caller
// waits for, never on the worker's thread: one that panics (recovered,
// printed to standard error) or calls runtime.Goexit ends only the
// helper; the worker keeps its thread and the item is finished normally.
// The helper counts as the worker for its waits (ErrDeadlock instead of
// a hang); errors the error handler causes are printed instead of being
// delivered to it again.
//
// The worker keeps a worklist and a list of delayed items whose timers are
// armed, both guarded by the worker's mutex, which is held for a few
// instructions at a time and never across a work function. A work item
// (Work, DelayedWork) is attached to one worker at a time, like the
// kernel's work->worker; it may move to another worker only while idle.
// Flushes insert a barrier item after the flushed item (or at the head of
// the list when it is running) and wait for it to run, as
// kthread_flush_work does; cancel-sync blocks queueing while it waits.
// While a cancel-sync holds an item, every other call on it returns at
// once with the kernel's answer, from the item itself or from outside:
// ModDelayedWork returns true without queueing, QueueWork and
// QueueDelayedWork return false, another cancel waits and returns false,
// and waits from the item's own function return ErrDeadlock.
//
// # Wake path
//
// An idle worker parks in a futex system call on a word of its own
// (internal/sched.Parker) and the queueing thread wakes it with futex_wake
// (Parker.Unpark) after linking the item. The kernel then schedules the
// worker at its own policy, so a SCHED_FIFO worker preempts ordinary load
// at once. No Go channel, mutex or sync.Cond is on this path: a goroutine
// locked to its thread and blocked on one of those is woken through an
// ordinary SCHED_OTHER thread first (startlockedm), and under CPU load the
// RT worker would wait behind it (DESIGN-NOTES, section 3). Flush and
// cancel waiters, which are not on the latency path, do wait on channels.
// Once awake, the worker takes its own mutex to unlink the item; the
// mutex guards only the lists, is held for a few instructions and never
// across a work function or a system call, so it is normally free.
//
// Like every thread that returns from a system call, a woken worker needs
// an idle P (GOMAXPROCS slot) to run Go code; when every P runs a busy
// goroutine it waits for one. Package wq raises GOMAXPROCS by one for each
// of its RT pools; a kthread worker created with WithFIFO or WithFIFOLow does too
// (one P while it lives; a class set later with SetFIFO does not reserve).
//
// # Per-CPU sets
//
// PerCPU is EROFS's z_erofs_pcpu_workers: one worker per online CPU, named name/<cpu>
// and bound to it, optionally SCHED_FIFO-low, plus a fallback workqueue
// (UNBOUND|HIGHPRI by default) for CPUs without a worker. Queue reads the
// CPU -> worker table with one atomic load: the table is an immutable
// slice replaced whole on every change, the Go shape of EROFS's
// RCU-protected array. The set subscribes to CPU hotplug through its
// Fallback (kthread/wqfallback: wq.OnCPUChange): when a CPU
// leaves, the new table is published first and the CPU's worker is then
// destroyed on another goroutine after its queued items have run; a queue
// that loaded the old table is refused by the retiring worker and goes to
// the fallback, so nothing is lost. When the CPU returns a worker is
// created again. Package kthread does not import wq: the fallback is a
// Fallback, and kthread/wqfallback.Queue makes one from a wq workqueue
// (or, given nil, allocates the set's own UNBOUND|HIGHPRI queue). A plain
// Work carries no fallback state: what it needs on a fallback (a wq.Work)
// is allocated the first time the item goes to one, and reused.
//
// # Guarantees
//
//   - Serial: the items of a worker run one at a time, in queue order, on
//     its thread. A work item never runs concurrently with itself: it
//     moves to another worker (or to a PerCPU set's fallback workqueue, or
//     back) only while idle, and queueing it while it runs queues it behind
//     itself on the same worker.
//   - Nothing is dropped: a queue call that returns true runs the item
//     once unless it is cancelled, including across Destroy and hotplug.
//     The one exception is Destroy with delayed items still armed, which
//     the kernel forbids: they are cancelled and Destroy returns
//     ErrDelayedPending naming them. When Destroy returns, no item of the
//     worker is pending: flushes and cancels of each return at once, and
//     each may be queued on another worker.
//   - Every wait returns: waits that would wait for the caller (from a
//     work function, or a handler running for it, on its own worker)
//     return at once and report ErrDeadlock.
//   - Panics in work functions are recovered and reported
//     (SetPanicHandler, default log/slog); the worker keeps serving.
//   - A work function that calls runtime.Goexit ends its goroutine and
//     thread; the worker detects it, starts a replacement thread with the
//     same name, affinity and class (TID changes), reports ErrGoexit and
//     keeps serving. Flush and cancel waiters are released normally,
//     after the report. The same for a work function that leaves the
//     thread (ErrThreadEscaped, see above).
//   - Use after Destroy: queueing returns false and reports ErrDestroyed
//     once per worker; nothing is left pending, nothing panics.
//   - Never a silent downgrade: a class the process may not use fails
//     creation with an error matching ErrPermission that says how to grant
//     the privilege.
//   - Allocation-free queueing: QueueWork, QueueDelayedWork,
//     ModDelayedWork and PerCPU.Queue make no allocation (Flush and cancel
//     allocate one barrier).
//
// # Kernel mapping
//
//	kthread_create_worker(flags, "name")          CreateWorker("name")
//	kthread_create_worker_on_cpu(cpu, flags, ...) CreateWorkerOnCPU(cpu, "name") -> thread "name/cpu"
//	sched_set_fifo(worker->task)                  WithFIFO() or SetFIFO(wk)         SCHED_FIFO 50
//	sched_set_fifo_low(worker->task)              WithFIFOLow() or SetFIFOLow(wk)   SCHED_FIFO 1
//	sched_set_normal(worker->task, nice)          WithNice(nice) or SetNormal(wk, nice)
//	kthread_init_work / DEFINE_KTHREAD_WORK       (*Work).Init, NewWork
//	kthread_init_delayed_work                     (*DelayedWork).Init, NewDelayedWork
//	kthread_queue_work                            (*Worker).QueueWork
//	kthread_queue_delayed_work                    (*Worker).QueueDelayedWork
//	kthread_mod_delayed_work                      (*Worker).ModDelayedWork
//	kthread_flush_work                            (*Worker).FlushWork, (*PerCPU).FlushWork
//	kthread_flush_worker                          (*Worker).FlushWorker
//	kthread_cancel_work_sync                      (*Worker).CancelWorkSync, (*PerCPU).CancelWorkSync
//	kthread_cancel_delayed_work_sync              (*Worker).CancelDelayedWorkSync
//	kthread_destroy_worker                        (*Worker).Destroy
//	worker->task's pid                            (*Worker).TID (0 once the thread has exited)
//	sched_getattr(worker->task)                   (*Worker).Class
//	EROFS z_erofs_pcpu_workers + cpuhp state      PerCPU: NewPerCPU, Queue, QueueLocal, Worker, Destroy
//
// Differences from the kernel: a work item queued on a second worker while
// busy on the first is refused (false, ErrOtherWorker reported) instead of
// WARNing and corrupting lists; FlushWork of an armed delayed item queues
// it at once and waits; waits that would wait for the caller's own thread
// return at once and report ErrDeadlock instead of hanging.
package kthread
