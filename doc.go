// Package wq brings the Linux kernel's concurrency-managed workqueues
// (cmwq, kernel/workqueue.c) to Go, on real OS threads wherever a worker's
// policy, nice or CPUs matter (goroutines otherwise), with the real-time
// worker classes proposed on the kernel mailing lists for latency-critical
// I/O post-processing.
//
// # Design
//
// A work item (Work, DelayedWork) is queued on a workqueue (Workqueue). A
// workqueue does not own threads: it is linked to worker pools through
// pool workqueues (pwq). A pool is a worklist and a set of workers, each an
// OS thread locked to its goroutine, with its CPU affinity, nice and
// scheduling policy set on its thread id; or, for the default unbound and
// ordered queues, plain goroutines (see Goroutine-backed pools below).
// Pools are shared: per CPU there is
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
// and CPU clock every millisecond instead (see cm.go). Thread-backed
// unbound pools are concurrency-managed too, unlike the kernel's, at the
// number of CPUs their workers may use: a worker needs one of GOMAXPROCS
// Ps, so more running workers than CPUs only hand Ps to each other. Once
// one of their items is seen blocked, they run every pending item at once,
// as the kernel's unbound pools do, until 10 ms pass with none seen
// blocked. Goroutine-backed pools (below) are not concurrency-managed.
// Unbound pools' pods come from the machine's topology (cpu,
// smt, cache_shard, cache, numa, system affinity scopes). The default scope
// is cache_shard, the kernel's newest default: each last-level cache split
// into pods of about CacheShardSize cores (8) with their SMT siblings, so
// that a machine with many CPUs per cache does not share one contended
// pool; an LLC of fewer than 12 cores stays one pod, as with cache.
//
// max_active bounds the items in flight per CPU (per-CPU queues) or per
// NUMA node (unbound queues); items over it wait on the pwq's inactive list
// and are activated in order. Ordered queues run one item at a time.
//
// # Attributes
//
// A queue's attributes are one typed value, Attrs (policy, nice, cpumask,
// affinity scope, strict, max_active, escape_after), read with
// Workqueue.Attrs and installed all or nothing with Workqueue.ApplyAttrs,
// as the kernel's apply_workqueue_attrs does. The string attributes
// (SetAttr, the wqhttp writes) and the typed setters (SetNice, SetCPUMask,
// ...) each change one field and go through the same path. Every number
// written is range-checked and every deadline built from a caller's
// duration saturates, as the kernel clamps timeouts: an out-of-range value
// returns ErrInvalidArgument and changes nothing, a delay of
// math.MaxInt64 never fires early. The workers of an unbound queue use the
// CPUs of its own cpumask that are in the global unbound cpumask
// (SetUnboundCPUMask), or the global mask alone when the two have none in
// common, as the kernel's wq_unbound_cpumask works.
//
// # The Go layer
//
// On top of the kernel's API, which returns bools and takes a Work the
// caller embeds, a Go program can queue closures and get errors back:
// Workqueue.Go and GoContext queue a function (its Work comes from a free
// list: no allocation beyond the closure), QueueErr is Queue with the
// reason, Workqueue.NewGroup gives errgroup's semantics (first error
// cancels, panics come back from Wait as *PanicError), and Submit returns
// a Future. docs/go-users.md maps ants, pond, conc, errgroup and
// client-go's workqueue onto these calls.
//
// # Wake path
//
// Idle workers park in a futex system call on a word of their own
// (internal/sched.Parker), and the queueing thread wakes them with
// futex_wake. The kernel then schedules the worker at its own policy: a
// SCHED_FIFO worker preempts the ordinary load at once. A Go channel, mutex
// or sync.Cond would instead hand the wake-up to an ordinary SCHED_OTHER
// thread first (see docs/design.md). Each RT pool also raises GOMAXPROCS
// by one while it lives, so that it finds an idle P when it returns from
// the futex, and gowq's own goroutines leave that P free: while any P is
// reserved, the items of goroutine-backed (default) queues run on at
// most GOMAXPROCS less the reserved Ps at once. Items blocked outside Go
// hold no P: when eight samples 0.5 ms apart see a P beyond the reserved
// ones unused, the bound is lifted for 10 ms, and an item refused for
// 10 ms while no other waiting item got a slot starts anyway (one per
// 10 ms); an RT worker may wait for a P for up to those bounds. What gowq cannot
// keep off the reserved P is the program's own goroutines: while they
// keep every P busy, an RT worker waits for a P in the Go runtime's run
// queue (Stats().PWait; the first wait over 1 ms is logged once).
//
// The way back is a goroutine's: a goroutine readied by a work function (a
// channel send, a sync primitive) or released by the item's completion (a
// Flush waiter) is put in the worker's P, which the locked worker cannot
// run. A worker that parks while such a goroutine may still be runnable
// there gives the P back to the runtime first, so that the goroutine runs
// on another thread at once instead of after a sysmon tick (up to 10 ms);
// otherwise it keeps the P for its next wake-up. The waiter still costs one
// more thread wake-up than with a go statement, whose goroutines share one
// thread (docs/design.md, "The wake path" 7).
//
// # Goroutine-backed pools
//
// An unbound or ordered queue whose attributes are the process's own (the
// normal class at nice 0, or at a nice that every thread the Go runtime
// may run the items on has, as in a process started with nice -n 5 but
// not after a renice -p of its main thread alone; a cpumask covering
// every CPU the process may use, not strict) has nothing to set on a
// thread. Its pool's workers are plain goroutines that park on a channel
// of their own, so a wake-up is a goroutine hand-off with no system call,
// and an item that blocks holds no thread. Everything above the worker is
// the same: pwqs, max_active, flush colors, non-reentrance, ordering, keyed
// chains, delayed work, the rescuer, Stats, the tracer and the stage
// recorder. What differs:
//   - no concurrency management and no CM monitor: the Go runtime hands a
//     blocked goroutine's P to other goroutines, so the pool starts a
//     worker for every pending item, as the kernel's unbound pools do;
//   - the pool's pods are not used (one pool per queue: goroutines run on
//     any CPU), and items are not repatriated;
//   - no CPU accounting: Stats().CPUTime stays 0 for such queues (a
//     goroutine's thread runs other goroutines too, and the runtime has no
//     per-goroutine CPU clock); the exec-time histogram is kept;
//   - no lock-free push: every queue call takes the pool lock
//     (Stats().Pushed stays 0);
//   - the items run at the nice and policy of the process's threads: in a
//     process started niced, at its nice, while a thread-backed normal
//     pool's workers get nice 0 where the process may lower its nice;
//   - dumps (Pools, wqhttp's wq_dump and /ui) show the workers as
//     "gworker/u<pool>:<id>" with tid 0 and CPU -1 (PoolInfo.Goroutines);
//     a tracer's execute events from them carry tid 0 and that name; the
//     queue_work event's tid stays the queuer's thread.
//
// An attribute change that makes the attributes non-default (a nice, a
// cpumask, strict affinity, a policy) moves the queue to a thread-backed
// pool, as any attribute change moves it to another pool, and a change
// back moves it back. Workqueue.GoroutineBacked says which. The Threads
// option keeps a default queue on kworker threads (names in top, CPU time
// per queue, concurrency management); the environment variable
// GOWQ_THREADS=1 does so for every queue of the process.
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
//     make no allocation; Go and GoContext none beyond the caller's
//     closure.
//   - "Never blocks", in these docs, means the call waits for no item, no
//     worker, no room and no timer. It may still wait for a short critical
//     section: the queue path takes the pool lock (a futex lock, or
//     sync.Mutex for goroutine-backed pools) whose contended path sleeps
//     in the kernel until the holder, a worker or another queuer, lets go;
//     a holder preempted by other threads makes that wait as long as its
//     preemption. Only calls documented to wait (Flush, Drain, Destroy,
//     CancelSync, QueueContext on a full queue...) wait for work.
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
//     needs a new thread. Goroutine-backed queues start no thread, but the
//     runtime creates one for each of their items blocked in a system
//     call: while a limit is near, their items in flight (blocked in Go or
//     not) stay within the threads the gate's headroom and the runtime's
//     unused threads leave them, beyond the gate's margin, and a
//     MemReclaim queue whose items wait there for 10 ms is run by its
//     rescuer. The promise ends at threads the program's own goroutines
//     create or hold (goroutines locked to a thread, or in a system call
//     while items are in flight), and at a limit set or tightened after a
//     reading that found room (the limits are read at most once a second
//     while none binds).
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
//   - Bounded backlog and bounded shutdown (gowq extensions): WithMaxPending(n)
//     bounds the items waiting on a queue beyond max_active: a queue of
//     max_active m holds at most m+n items, each counted from the call
//     that queues it until its function returns (keyed chains included;
//     armed delayed items count once their timer queues them); past it
//     the calls without a context return false or ErrQueueFull, and
//     QueueContext, GoContext, Submit and Group.Go wait for room.
//     DestroyContext and DrainContext bound the caller's wait, never what
//     the queue accepts: past the deadline the queue keeps refusing work
//     and finishes its drain on its own.
//     CancelPending drops the backlog and leaves running items alone.
//     Stats().Pending is the backlog; the metrics package exports it as
//     gowq_workqueue_depth, and as client-go's workqueue_depth{name} with
//     metrics.Options{ClientGo: true}.
//   - Logging: what gowq logs (the default handlers, the watchdog,
//     warnings) goes to SetLogger's logger, or a queue's own (WithLogger),
//     with the attribute workqueue=<name>; slog.Default() otherwise.
//
// The kernel function each call mirrors is named in its doc comment;
// docs/kernel-api.md has the whole mapping.
package wq
