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
//   - Non-reentrant: a work item never runs concurrently with itself while
//     it is queued on one workqueue; queueing it while it runs runs it once
//     more afterwards.
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
//     ErrWorkerExit). The reset comes when the work function returns: a
//     function that unlocks the thread all 64 levels and then blocks in Go
//     lets ordinary goroutines run on its RT thread until it returns.
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
//   - Bounded backlog and bounded shutdown (gowq extensions): MaxPending(n)
//     bounds the items waiting on a queue (queued and not started, keyed
//     chains included; armed delayed items count once their timer queues
//     them); past it queue calls return false with ErrQueueFull, and
//     QueueContext waits for room. DestroyContext and DrainContext bound
//     the caller's wait, never what the queue accepts: past the deadline
//     the queue keeps refusing work and finishes its drain on its own.
//     CancelPending drops the backlog and leaves running items alone.
//     Stats().Pending is the backlog; the metrics package exports it as
//     client-go's workqueue_depth.
//   - Logging: what gowq logs (the default handlers, the watchdog,
//     warnings) goes to SetLogger's logger, or a queue's own (WithLogger),
//     with the attribute workqueue=<name>; slog.Default() otherwise.
//
// The kernel function each call mirrors is named in its doc comment;
// docs/kernel-api.md has the whole mapping.
package wq
