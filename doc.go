// Package wq brings the Linux kernel's concurrency-managed workqueues
// (cmwq, kernel/workqueue.c) to Go, on real OS threads, with the real-time
// worker classes proposed on the kernel mailing lists for latency-critical
// I/O post-processing.
//
// # Design
//
// A work item (Work, DelayedWork) is queued on a workqueue (Workqueue). A
// workqueue does not own threads: it is linked to worker pools through
// pool workqueues (pwq). A pool is a worklist and a set of workers, each an
// OS thread locked to its goroutine, with its CPU affinity, nice and
// scheduling policy set on its thread id. Pools are shared: per CPU there is
// one pool per worker class (normal: nice 0; high priority: nice -20; RT:
// SCHED_FIFO at the lowest RT priority, names ending in "F"), used by every
// per-CPU workqueue of that class; unbound pools are shared by every
// unbound workqueue whose attributes (class, pod, cpumask, strict) are
// equal.
//
// Per-CPU pools are concurrency-managed: items that do not sleep run one at
// a time, and when the running item blocks the pool wakes another worker
// for the next item. An item that runs longer than the CPU-intensive
// threshold (10 ms) without sleeping stops counting. The kernel learns of
// blocking from the scheduler; gowq samples each busy worker's thread state
// and CPU clock every millisecond instead (see cm.go). Unbound pools are not
// concurrency-managed; their pods come from the machine's topology (cpu,
// smt, cache, numa, system affinity scopes).
//
// max_active bounds the items in flight per CPU (per-CPU queues) or per
// NUMA node (unbound queues); items over it wait on the pwq's inactive list
// and are activated in order. Ordered queues run one item at a time.
//
// # Wake path
//
// Idle workers park in a futex system call on a word of their own
// (internal/sched.Parker), and the queueing thread wakes them with
// futex_wake. The kernel then schedules the worker at its own policy: a
// SCHED_FIFO worker preempts the ordinary load at once. A Go channel, mutex
// or sync.Cond would instead hand the wake-up to an ordinary SCHED_OTHER
// thread first (see docs/design.md). Each RT worker also raises GOMAXPROCS
// by one while it lives, so that it finds an idle P when it returns from
// the futex.
//
// # Guarantees
//
//   - Non-reentrant, process-wide: a work item never runs concurrently
//     with itself. Queueing it on its queue while it runs runs it once more
//     afterwards; queueing it on another queue while it runs is refused
//     (false, ErrOtherQueue; the kernel allows it and then guarantees
//     non-reentrance per queue only). So Busy, Flush, CancelSync and
//     DisableSync, which follow the item's one running instance, are
//     exact: when CancelSync returns, the item is neither pending nor
//     running anywhere.
//   - Nothing is dropped: every queue call that returns true runs the item
//     exactly once unless it is cancelled; a panicking item is recovered,
//     reported and counts as completed; a refused queue call returns false
//     and leaves the item idle.
//   - Allocation-free queueing: Queue, QueueOn and requeueing an idle item
//     make no allocation.
//   - Per-key order (gowq extension, QueueKeyed): items queued under one
//     key run one at a time in queue order, keys run concurrently; a
//     key's backlog waits in an intrusive chain, not on the workqueue, so
//     it delays no other key; Flush, Drain and Destroy wait for it.
//   - Threads whose attributes were changed never return to the Go runtime:
//     their goroutines exit while still locked (locked 64 deep, so a stray
//     runtime.UnlockOSThread in a work function cannot release them; a
//     worker whose goroutine was moved off its thread anyway is retired and
//     the thread reset to the process's attributes, reported as
//     ErrWorkerExit). The reset comes when the work function ends, by
//     returning, panicking or runtime.Goexit, whichever thread the
//     goroutine ends on: a function that unlocks the thread all 64 levels
//     and then blocks in Go lets ordinary goroutines run on its RT thread
//     until it ends.
//   - No thread limit aborts the process: the Go runtime aborts when it
//     cannot create a thread, so every thread gowq starts (workers,
//     rescuers, the escaper, the CM monitor, RT timer threads, kthread
//     workers) goes through one gate that reads the thread limits
//     (RLIMIT_NPROC, pids.max, kernel.threads-max and pid_max) before each
//     creation and refuses, with ErrThreadLimit, within a margin of them.
//     A MemReclaim queue's rescuer is started by Alloc, so a rescue never
//     needs a new thread.
//   - Every wait returns: no call on an item waits for a thread that waits
//     for the caller. While CancelSync or DisableSync waits for a running
//     instance it holds the item: Queue returns false, ModDelayed returns
//     true without queueing, Cancel returns false, also from inside the
//     item. Self-waits return ErrDeadlock.
//   - Destroy leaves nothing pending: it drains queued work (keyed chains
//     included) and cancels
//     delayed items still armed on the queue (reported as
//     ErrDelayedPending; they are idle and can be queued elsewhere).
//   - Callbacks cannot break a worker: a panic in the tracer, panic handler
//     or lockup hook is recovered; runtime.Goexit in a work function or a
//     callback retires the worker through one exit path that finishes its
//     item and starts a replacement.
//   - Worker creation that fails (thread limits, attributes the kernel
//     refuses) loses nothing: pools retry every 100 ms, MemReclaim queues'
//     rescuers run the work, idle workers of other pools are let go to make
//     room, and the failure shows in Stats (CreateErrors, CreateError) and
//     the error handler (rate-limited). A queue without a rescuer whose pool
//     can never get a thread (a thread limit the process already uses up)
//     keeps its items pending until it can: Flush waits, FlushContext and
//     DrainContext time out.
//
// The kernel function each call mirrors is named in its doc comment;
// docs/kernel-api.md has the whole mapping.
package wq
