package wq

import (
	"context"
	"fmt"
	"sync"
)

// Group is a set of functions run on one workqueue, with the semantics of
// golang.org/x/sync/errgroup: Wait waits for the group's functions, and
// the first error (or panic) cancels the group's context and is what
// Wait returns. The functions run as work items of the queue (its worker
// class, CPUs, max_active), not on goroutines of their own.
//
// A Group is made by Workqueue.NewGroup. The zero Group is not valid: its
// Go and TryGo run nothing and record an error matching
// ErrInvalidArgument, which Wait returns. A Group must not be copied. Its
// methods are safe from any goroutine, also from the group's own
// functions (except Wait, see there). A Group may be reused after Wait
// returns, but its context is then cancelled.
type Group struct {
	q      *Workqueue
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // functions admitted and not yet returned

	mu     sync.Mutex
	cond   sync.Cond // L is &mu: Go waits here while the limit is reached
	limit  int       // guarded by mu: < 0 for no limit
	active int       // guarded by mu: functions admitted and not yet returned
	err    error     // guarded by mu: the first error
}

// errZeroGroup is recorded by a zero Group.
var errZeroGroup = fmt.Errorf("%w: zero wq.Group (use Workqueue.NewGroup)", ErrInvalidArgument)

// NewGroup returns a new Group whose functions run on q, and the context
// they receive: derived from ctx (context.Background when ctx is nil), it
// is cancelled the first time a function returns a non-nil error or
// panics, or when Wait returns, whichever comes first; context.Cause
// gives that error. The Group has no limit (see SetLimit). Never blocks.
// Safe from any goroutine. Mirrors errgroup.WithContext; the kernel has
// no counterpart.
func (q *Workqueue) NewGroup(ctx context.Context) (*Group, context.Context) {
	if ctx == nil {
		ctx = context.Background()
	}
	g := &Group{q: q, limit: -1}
	g.cond.L = &g.mu
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	return g, g.ctx
}

// Go queues fn(ctx) on the group's workqueue, ctx being the context
// NewGroup returned. It blocks while the group's limit is reached (see
// SetLimit), then, on a queue full under MaxPending, while the queue has
// no room, until the group's context is done (as GoContext waits with
// its ctx); otherwise it never blocks. A Go whose wait ends with the
// context counts as fn returning ctx.Err(), and fn never runs; with a
// cancelled context and room on the queue, fn is queued (errgroup's
// rule, below).
//
// The first call of the group's functions to return a non-nil error
// cancels the group's context; Wait returns that error. A panic in fn is
// recovered on the worker, which goes on serving: it counts as fn
// returning a *PanicError (the value and the stack; errors.As). A
// runtime.Goexit in fn counts as fn returning an error matching
// ErrWorkerExit. A Go that the queue refuses (ErrDestroyed, ErrDraining,
// ...; a Destroy or Drain that begins while it waits for room refuses it
// too) counts as fn returning that error, and fn never
// runs; so does a nil fn, with ErrNoFunc ("wq: Group.Go: nil function";
// ErrDestroyed first on a destroyed queue), and a function that
// CancelPending dropped before it started, with ErrCancelled, as does one
// whose Go call ended inside the tracer's queue_work (runtime.Goexit),
// before fn was linked. Group panics count in the
// queue's Stats().Panics but are not given to its panic handler: Wait is
// their handler.
//
// fn runs even when the group's context is already cancelled (fn sees
// ctx.Err() and decides), as with errgroup. It runs with ctx's pprof
// labels and, under an execution trace, as a region of ctx's task (see
// GoContext). Go from inside one of the group's functions is allowed and
// does not wait for the caller, unless the limit is reached: then it waits
// for another of the group's functions to return, and waits forever when
// the caller holds the last slot, as errgroup's does. The same holds for
// a full queue: the wait for room ends when another item of the queue
// ends, or with the group's context.
//
// Allocation: none beyond the caller's closure (the item comes from Go's
// free list), unless it waits for room.
func (g *Group) Go(fn func(ctx context.Context) error) {
	if g.q == nil {
		g.setErr(errZeroGroup)
		return
	}
	g.mu.Lock()
	for g.limit >= 0 && g.active >= g.limit {
		g.cond.Wait()
	}
	g.active++
	g.mu.Unlock()
	g.start(fn)
}

// TryGo is Go that does not wait: it returns false, and queues nothing,
// when the group's limit is reached or when the queue refuses fn (full
// under MaxPending, draining, destroyed: pond's TrySubmit); such a refusal
// is not recorded as the group's error and cancels nothing. It returns
// true when fn was queued; a nil fn is admitted and counts as returning
// ErrNoFunc, as with Go. A zero Group returns false. Never blocks.
// Mirrors errgroup's TryGo.
func (g *Group) TryGo(fn func(ctx context.Context) error) bool {
	if g.q == nil {
		g.setErr(errZeroGroup)
		return false
	}
	g.mu.Lock()
	if g.limit >= 0 && g.active >= g.limit {
		g.mu.Unlock()
		return false
	}
	g.active++
	g.mu.Unlock()
	if fn == nil {
		g.start(fn)
		return true
	}
	g.wg.Add(1)
	it := getGoItem()
	it.efn, it.grp, it.ctx = fn, g, g.ctx
	if err := g.q.goQueue(it); err != nil {
		g.done(nil) // not admitted after all: frees the slot, records nothing
		return false
	}
	return true
}

// SetLimit limits the number of the group's functions admitted and not
// yet returned to n: a Go past it waits, a TryGo returns false. A
// negative n removes the limit (the default); 0 admits nothing: Go
// waits until SetLimit raises the limit. As with errgroup's SetLimit, the
// limit counts functions queued as well as running; max_active still
// bounds how many run at once. Unlike errgroup's, it may be called while
// functions are active: it applies to the next admissions, and wakes the
// Go calls waiting if the new limit lets them in. Never blocks.
func (g *Group) SetLimit(n int) {
	if n < 0 {
		n = -1
	}
	g.mu.Lock()
	g.limit = n
	if g.cond.L != nil {
		g.cond.Broadcast()
	}
	g.mu.Unlock()
}

// Wait blocks until every function admitted by Go and TryGo has returned
// (or was refused), then cancels the group's context and returns the first
// non-nil error among them, nil if none (a *PanicError for a panic). It
// waits for this group's functions only, not for other items of the
// queue. Destroying the queue meanwhile does not break it: Destroy runs
// every function already queued before it returns, and a Go after that
// counts as returning ErrDestroyed, so Wait returns once they are done.
// Called from inside one of the group's functions it would wait for
// itself: it returns an error matching ErrDeadlock at once, also when the
// function unlocked the worker's goroutine from its thread and it moved,
// and from the tracer's queue_work of one of them (on the goroutine
// calling Go, which holds the item until the tracer returns).
// A zero Group returns an error matching ErrInvalidArgument. Mirrors
// errgroup's Wait.
func (g *Group) Wait() error {
	if g.q == nil {
		return errZeroGroup
	}
	if g.inOwnFunction() {
		return fmt.Errorf("wq: Group.Wait from inside one of the group's functions: %w", ErrDeadlock)
	}
	g.wg.Wait()
	g.mu.Lock()
	err := g.err
	g.mu.Unlock()
	g.cancel(err)
	return err
}

// start runs an admitted fn: queues it, or counts a refusal as its
// error.
func (g *Group) start(fn func(ctx context.Context) error) {
	g.wg.Add(1)
	if err := g.q.checkDestroyed(); err != nil {
		g.done(err) // ErrDestroyed first, whatever fn is
		return
	}
	if fn == nil {
		g.done(errNoFuncGroup)
		return
	}
	it := getGoItem()
	it.efn, it.grp, it.ctx = fn, g, g.ctx
	if err := g.q.goQueueWait(g.ctx, it); err != nil {
		g.done(err)
	}
}

// run is the body of one of the group's items, on its worker: fn's error,
// a recovered panic or a Goexit ends the function for the group.
func (g *Group) run(ctx context.Context, fn func(context.Context) error, it *goItem) {
	var err error
	returned := false
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				err = newPanicError(r)
			} else {
				err = errGoexit
			}
		}
		it.leaveCount() // room on the queue before Wait can return
		g.done(err)
	}()
	err = fn(ctx)
	returned = true
}

// done ends one admitted function with err.
func (g *Group) done(err error) {
	g.setErr(err)
	g.mu.Lock()
	g.active--
	if g.limit >= 0 {
		g.cond.Signal()
	}
	g.mu.Unlock()
	g.wg.Done()
}

// setErr records err if it is the group's first, and cancels the context.
func (g *Group) setErr(err error) {
	if err == nil {
		return
	}
	g.mu.Lock()
	first := g.err == nil
	if first {
		g.err = err
	}
	g.mu.Unlock()
	if first && g.cancel != nil {
		g.cancel(err)
	}
}

// inOwnFunction reports whether the caller is a worker running one of
// g's functions, also one whose goroutine left the worker's thread
// (selfWorker), or the goroutine queueing one of them, in the tracer's
// queue_work (the item in transit).
func (g *Group) inOwnFunction() bool {
	if v, ok := transitWork.Load(transitSelf()); ok {
		// The tracer's queue_work of one of the group's items, on the
		// goroutine that queues it (also nested, in a queue_work of an
		// item the tracer queues): the item moves on when it returns.
		for r := v.(*transitRec); r != nil; r = r.outer {
			if w := r.w; w.oneShot && goItemOf(w).grp == g {
				return true
			}
		}
	}
	wk := selfWorker()
	if wk == nil {
		return false
	}
	w := wk.current // the worker's own field, read on its own goroutine
	return w != nil && w.oneShot && goItemOf(w).grp == g
}
