package wq

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"unsafe"
)

// The Go layer: closures and errors.
//
// Queue, QueueOn and the other kernel-style calls return a bool, as the
// kernel's do, and report a refusal to the error handler. The calls of
// this layer return the refusal instead, and report nothing: QueueErr
// and QueueOnErr for a caller's Work, Go and GoContext for a closure,
// Group (group.go) and Submit (future.go) on top of them.
//
// Every queue path returns its reason as an error from one place
// (queueOnErr, queuePendedErr; the checks are admit.go's): nil when it
// queued the item, errPending when the item was already pending (the
// kernel's dedup, not a refusal), otherwise the refusal, with the item's
// PENDING released. The bool calls turn that into a report (result); the
// error calls return it as it is, so that a refusal added to the queue
// path reaches them unchanged.
//
// A closure needs a Work to travel in. Go takes one from a free list (a
// sync.Pool of goItems, each a Work and the fields of one call), so that
// queueing a closure allocates nothing beyond the closure itself. A
// goItem is one-shot: nobody outside gowq holds its Work, and it goes back
// to the free list only once nothing inside gowq refers to it either,
// that is after its worker has cleared its current item under the pool
// lock (worker.afterItem), which is after execute_end, the stage recorder,
// the panic handler and the flush bookkeeping, and after the last place
// where the watchdog or a pool dump can find it. A goItem refused by the
// queue goes back at once: a refused item is idle and was never linked.

// errPending is the queue path's answer for an item that was already
// pending: the item was not queued again, and its pending instance will
// run. Never returned to a caller.
var errPending = errors.New("wq: work item already pending")

// errDestroying is the refusal of a queue call while Destroy drains the
// queue: both ErrDestroyed and ErrDraining match it.
var errDestroying error = &refusal{"wq: workqueue is being destroyed", []error{ErrDestroyed, ErrDraining}}

// errNilContext is the refusal of a nil context.Context.
var errNilContext = fmt.Errorf("%w: nil context.Context", ErrInvalidArgument)

// refusal is an error that matches several sentinels (errors.Is).
type refusal struct {
	msg  string
	errs []error
}

func (e *refusal) Error() string   { return e.msg }
func (e *refusal) Unwrap() []error { return e.errs }

// QueueErr is Queue with the reason. It returns (true, nil) when it
// queued w, and (false, nil) when w was already pending: that is the
// kernel's dedup, not an error, and the pending instance will run. Every
// refusal returns false and a non-nil error, matched with errors.Is, in
// this order (the first that applies):
//   - ErrInvalidArgument: q is nil;
//   - ErrDestroyed: q was destroyed, whatever w is;
//   - ErrNoFunc: w is nil or has no function (not initialised with Init);
//   - ErrDisabled: w is disabled (Disable), or a CancelSync or DisableSync
//     holds it (Queue returns false for it without a report);
//   - ErrDraining: q drains (Drain) and the caller is not one of q's own
//     items; while Destroy drains q, an error matching both ErrDraining
//     and ErrDestroyed;
//   - ErrOtherQueue: w runs now on another queue;
//   - ErrQueueFull: q has MaxPending items waiting.
//
// A refused w is left idle, as it was. Unlike Queue, QueueErr reports
// nothing to the error handler: the caller has the error. It never
// blocks and makes no allocation. Safe from any goroutine. Mirrors
// queue_work().
func (q *Workqueue) QueueErr(w *Work) (queued bool, err error) {
	if q == nil {
		return false, errNilQueue
	}
	return queuedErr(q.queueOnErr(cpuUnbound, w, nil))
}

// QueueOnErr is QueueOn with the reason, as QueueErr is Queue's; a cpu
// that does not exist returns false and an error matching ErrInvalidCPU.
// Mirrors queue_work_on().
func (q *Workqueue) QueueOnErr(cpu int, w *Work) (queued bool, err error) {
	if q == nil {
		return false, errNilQueue
	}
	return queuedErr(q.queueOnChecked(cpu, w))
}

func queuedErr(err error) (bool, error) {
	switch err {
	case nil:
		return true, nil
	case errPending:
		return false, nil
	}
	return false, err
}

// Go queues fn to run once on one of q's workers, as Queue would queue a
// Work that runs fn. It returns nil when fn is queued; fn then runs
// exactly once, unless CancelPending drops it first (nothing tells fn's
// caller: count with CancelPending's result, or use a Group or Submit,
// whose Wait then returns ErrCancelled) or the process exits. It returns
// an error, and
// fn never runs, when q refuses it (errors.Is), in this order:
//   - ErrInvalidArgument: q is nil;
//   - ErrDestroyed: q was destroyed, whatever fn is;
//   - ErrNoFunc: fn is nil ("wq: Workqueue.Go: nil function");
//   - ErrDraining: q drains (Drain) and the caller is not one of q's own
//     items (an item of q may Go onto q while it drains, as chained work);
//     while Destroy drains q, an error matching both ErrDraining and
//     ErrDestroyed;
//   - ErrQueueFull: q holds max_active + MaxPending items (Go never
//     waits for room: GoContext does).
//
// Refusals are returned, not reported to the error handler. Go never
// blocks. It allocates nothing beyond the caller's closure: the Work that
// carries fn comes from a free list and goes back to it after fn's run.
// fn runs as a work function of q: on the caller's CPU's pool for a
// per-CPU queue, within max_active, in q's worker class. A panic in fn
// goes to q's panic handler (WithPanicHandler, SetPanicHandler), and the
// worker lives. The item that carries fn is recycled after the run: the
// stage recorder's Stages.Work is valid only during the recorder call.
// Flush and Drain of q wait for fn, and Destroy runs it before it
// returns. Safe from any goroutine, also from inside a work function.
// The kernel has no closures; the nearest is queue_work() of a
// work_struct allocated for one run.
func (q *Workqueue) Go(fn func()) error {
	if q == nil {
		return errNilQueue
	}
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if fn == nil {
		return errNoFuncGo
	}
	g := getGoItem()
	g.gofn = fn
	return q.goQueue(g)
}

// GoContext is Go for a function that takes a context, and a context
// that bounds a wait for room: on a queue full under MaxPending it waits,
// as QueueContext does, until an item of q frees its place or ctx is done,
// instead of returning ErrQueueFull (pond's blocking Submit, ants'
// blocking mode). The worker runs fn(ctx) with ctx's pprof labels
// (runtime/pprof.WithLabels) set on its goroutine for the item's duration,
// so that CPU profiles charge the run to the caller's labels, and removes
// them after (workers carry no labels of their own). While a
// runtime/trace execution trace is running, the run is a region of ctx's
// trace task named after fn, and wqtrace.RegionTracer makes its execution
// task a child of ctx's task (wqtrace.Event.Context).
//
// It returns an error matching ErrInvalidArgument for a nil q or ctx,
// then as Go (ErrDestroyed first, then ErrNoFunc for a nil fn), then
// ctx.Err() without queueing when ctx is already done, then as Go,
// ErrQueueFull aside: on a full queue it waits, and returns ctx.Err() if
// ctx ends first (fn never runs). A Destroy or Drain that begins while
// it waits wakes it with Go's refusal (ErrDestroyed, ErrDraining). Once
// queued, fn runs even if ctx ends before it starts: fn sees ctx and
// decides (a queued item is never dropped silently). It blocks only
// while the queue is full; on an unbounded queue it never blocks. Called
// from one of q's own items on a full queue, it waits for another item
// to end: with max_active 1 that is a deadlock that ctx must bound. No
// allocation beyond the caller's closure, unless it waits (the labels
// and the region cost nothing while no trace runs). Safe from any
// goroutine.
func (q *Workqueue) GoContext(ctx context.Context, fn func(context.Context)) error {
	if q == nil {
		return errNilQueue
	}
	if ctx == nil {
		return errNilContext
	}
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if fn == nil {
		return errNoFuncGoContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g := getGoItem()
	g.cfn, g.ctx = fn, ctx
	return q.goQueueWait(ctx, g)
}

// goItem is the Work of one Go, GoContext, Group.Go or Submit call, from
// the free list goItems. Exactly one of gofn, cfn, efn (with grp) or task
// is set while it is in use; all are nil on the free list. The fields are
// written by the caller before the item is queued and read by its worker;
// the queue path orders the two.
type goItem struct {
	Work // first: goItemOf converts a *Work back (container_of)

	gofn func()                      // Go
	cfn  func(context.Context)       // GoContext
	efn  func(context.Context) error // Group.Go
	grp  *Group                      // Group.Go
	task goTask                      // Submit: the future, which runs its function
	ctx  context.Context             // every call but Go
}

// goTask is what Submit queues: a Future of some T.
type goTask interface {
	runTask(ctx context.Context, it *goItem)
	cancelTask(err error) // done with err, never run
	taskFunc() any        // the user's function, for Work.Func
}

// goItems is the free list of goItems. sync.Pool: per-P caches, no lock on
// the fast path; items it drops at a GC are garbage-collected, and the
// next Get allocates one (amortised, not per call).
var goItems = sync.Pool{New: func() any {
	g := &goItem{}
	g.Init(g.run)
	g.oneShot = true
	return g
}}

func getGoItem() *goItem { return goItems.Get().(*goItem) }

// goItemOf returns the goItem whose Work w is. w.oneShot must be set.
func goItemOf(w *Work) *goItem { return (*goItem)(unsafe.Pointer(w)) }

// goQueue queues g on q, or puts it back on the free list and returns the
// refusal.
func (q *Workqueue) goQueue(g *goItem) error {
	err := q.queueOnErr(cpuUnbound, &g.Work, nil)
	if err != nil {
		g.recycle() // refused: idle, never linked
	}
	return err
}

// goQueueWait is goQueue that waits for room while q is full, until ctx
// is done (queueWait).
func (q *Workqueue) goQueueWait(ctx context.Context, g *goItem) error {
	err := q.queueWait(ctx, &g.Work)
	if err != nil {
		g.recycle() // refused: idle, never linked
	}
	return err
}

// releaseGoItem puts the goItem whose Work w is back on the free list,
// after its run. Called by w's worker with its pool lock held, once the
// worker no longer shows w as its current item. Only an idle, enabled
// item goes back: the stage recorder is handed w (Stages.Work) and may
// queue, cancel or disable it during its call. An item queued again
// (pending, or started on another worker) is left to that run, which
// releases it; a disabled one is left to the garbage collector, since the
// next Go to take it from the free list would fail with ErrDisabled.
func releaseGoItem(w *Work) {
	if w.state.Load()&(stPending|stCanceling|stDisableMask) != 0 || w.runner.Load() != nil {
		return
	}
	goItemOf(w).recycle()
}

func (g *goItem) recycle() {
	g.gofn, g.cfn, g.efn, g.grp, g.task, g.ctx = nil, nil, nil, nil, nil, nil
	g.name.Reset()
	goItems.Put(g)
}

// run is the work function of every goItem.
func (g *goItem) run() {
	if fn := g.gofn; fn != nil {
		fn() // a panic goes to the worker, which reports it
		return
	}
	ctx := g.ctx
	pprof.SetGoroutineLabels(ctx)
	defer pprof.SetGoroutineLabels(context.Background())
	if trace.IsEnabled() {
		defer trace.StartRegion(ctx, g.Func()).End()
	}
	switch {
	case g.cfn != nil:
		g.cfn(ctx)
	case g.efn != nil:
		g.grp.run(ctx, g.efn, g)
	default:
		g.task.runTask(ctx, g)
	}
}

// leaveCount takes g's instance out of its queue's MaxPending count
// (worker.leaveCount), for a Group's or a Future's function that has
// returned, before its end is reported to Wait. On g's worker's
// goroutine, inside g's run.
func (g *goItem) leaveCount() {
	if wk := g.runner.Load(); wk != nil {
		wk.leaveCount()
	}
}

// userFunc returns the function the caller gave, for Work.Func.
func (g *goItem) userFunc() any {
	switch {
	case g.gofn != nil:
		return g.gofn
	case g.cfn != nil:
		return g.cfn
	case g.efn != nil:
		return g.efn
	case g.task != nil:
		return g.task.taskFunc()
	}
	return nil
}

// traceContext returns the context the item was queued with (GoContext,
// Group.Go, Submit), nil for other items: wqtrace.Event.Context.
func (w *Work) traceContext() context.Context {
	if !w.oneShot {
		return nil
	}
	return goItemOf(w).ctx
}

// cancelGoItem ends the goItem whose Work w is, when w was cancelled
// before it ran by a path that took it off a list, such as CancelPending,
// or released it unlinked because the queuing goroutine is ending (a
// tracer's runtime.Goexit in queue_work, where no caller is left to take
// the refusal; a queue refusal is not such a path: goQueue handles
// those): a Group function counts as
// returning ErrCancelled, a Future is done with it, and the item goes back
// to the free list. Every path that cancels queued items wholesale must
// call it for each oneShot item it cancelled, after releasing PENDING, or
// a Group.Wait on it never returns. w must be idle and referred to by
// nobody else; a Work that is not oneShot is left alone.
func cancelGoItem(w *Work) {
	if !w.oneShot {
		return
	}
	g := goItemOf(w)
	switch {
	case g.grp != nil:
		g.grp.done(ErrCancelled)
	case g.task != nil:
		g.task.cancelTask(ErrCancelled)
	}
	g.recycle()
}
