package wq

import (
	"log/slog"
	"time"
)

// Alloc's options: the Option type, what the options set, and every
// option. Alloc reads and checks them (alloc.go).

// Option adjusts Alloc.
type Option func(*options)

type options struct {
	fallback     bool
	panicHandler func(PanicInfo)
	errorHandler func(op, fn string, err error)
	escapeAfter  time.Duration
	escapeSet    bool
	threads      bool // Threads: thread workers even where goroutines would do
	maxPending   int
	logger       *slog.Logger
}

// AllowRTFallback makes Alloc of an RT queue that the process may not run
// at SCHED_FIFO fall back, with a slog warning, instead of failing with
// ErrPermission: to the HighPri class (nice -20) when the process may take
// nice -20, else to the normal class (nice 0), as an unprivileged process
// without RLIMIT_NICE gets. A HighPri queue without the privilege for nice
// -20 falls back to the normal class likewise. Stats() shows the class
// obtained (Policy), Fallback true and FallbackReason the refusals: for an
// RT queue that got the normal class, both SCHED_FIFO's and nice -20's.
func AllowRTFallback() Option { return func(o *options) { o.fallback = true } }

// WithPanicHandler gives the queue its own panic handler: panics of work
// functions run from this queue call h, as SetPanicHandler describes,
// instead of the process-wide handler. nil (the default) means the
// process-wide one (SetPanicHandler, or its slog default). So that two
// libraries in one program each see their own panics.
func WithPanicHandler(h func(PanicInfo)) Option {
	return func(o *options) { o.panicHandler = h }
}

// WithErrorHandler gives the queue its own error handler: usage errors of
// operations on this queue (queueing on it, QueueDelayed, ModDelayed,
// Flush, Drain, Destroy) call h, as SetErrorHandler describes, instead of
// the process-wide handler. nil (the default) means the process-wide one
// (SetErrorHandler, or its slog default). Errors of operations on an item
// alone (Work.Flush, Work.Cancel, ...) and of the shared worker pools
// still go to the process-wide handler.
func WithErrorHandler(h func(op, fn string, err error)) Option {
	return func(o *options) { o.errorHandler = h }
}

// Threads asks for OS-thread workers for a queue whose attributes would
// otherwise make its pools goroutine-backed (an unbound or ordered queue
// of the normal class over every CPU): its workers are then named
// kworker threads with their own tids, visible in top and ps, concurrency
// managed by the CM monitor, and charged CPU time per queue. It has no
// effect on other queues, which are thread-backed anyway.
//
// In a process started niced (nice -n 19), the items of a default queue
// run at the process's nice, as every goroutine does; with Threads() its
// workers get the class's nice 0 where the process may lower its nice
// (root, CAP_SYS_NICE, RLIMIT_NICE), and keep the inherited nice
// otherwise (Stats().ClassError says so). GOWQ_THREADS=1 does the same
// for every default queue.
func Threads() Option { return func(o *options) { o.threads = true } }

// WithMaxPending bounds the items that may wait on the queue beyond
// max_active to n: a queue of max_active m then holds at most m+n items at
// once, counted from the queue call that admits an item until its
// function returns (before Flush, Future.Wait or Group.Wait can return
// for it), or until it is cancelled. An idle queue takes exactly m+n
// items queued at once, whatever the scheduling, and so do many producers
// racing. Past that, Queue, QueueOn, QueueNode, QueueKeyed, and
// QueueDelayed and ModDelayed with no delay, return false and report
// ErrQueueFull to the error handler (once until the count falls again,
// like ErrDraining); QueueErr, Go and TryGo return ErrQueueFull; and the
// calls that take a context wait for room until it is done: QueueContext,
// GoContext, Submit and Group.Go (with the group's context).
//
// The corners: m is the queue's max_active at the time of the call
// (MaxActive; SetMaxActive moves the bound and wakes the waiters). For a
// per-CPU queue, whose max_active is per CPU, m+n bounds the whole queue.
// Keyed items (QueueKeyed) count whether they wait for max_active or for
// their key, so m+n keyed items of one key fill the queue while one of
// them runs. Delayed items count from the moment their timer queues them,
// not while armed, and a timer that fires is never refused: the count may
// then exceed m+n for a while. Items that q's own items queue (chained
// work) are bounded like any other. n = 0 (the default) is unbounded, as
// the kernel's queues are; a negative n makes Alloc fail with
// ErrInvalidArgument. A gowq extension, with pond's WithQueueSize and
// ants' WithMaxBlockingTasks as precedents.
func WithMaxPending(n int) Option { return func(o *options) { o.maxPending = n } }

// WithEscapeAfter makes Alloc set escape_after (see SetEscapeAfter); Alloc
// fails with ErrInvalidArgument for an unbound queue or d < 0.
func WithEscapeAfter(d time.Duration) Option {
	return func(o *options) { o.escapeAfter, o.escapeSet = d, true }
}

// WithLogger gives the queue its own logger: the messages gowq logs about
// this queue (its default panic and error reports, Alloc's warnings) go to
// l, with the attribute workqueue=<name>, instead of the process-wide
// logger (SetLogger). Messages about pools shared by several queues (the
// watchdog's) still go to the process-wide one. nil means the process-wide
// logger.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }
