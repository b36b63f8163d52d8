package wq

import (
	"context"
	"fmt"
)

// Future is the result of a function queued with Submit: a value of type
// T and an error, available once the function has returned. Its methods
// are safe from any goroutine; Wait may be called any number of times and
// returns the same result each time. A Future is made by Submit only.
type Future[T any] struct {
	done chan struct{}                    // closed once val and err are set
	fn   func(context.Context) (T, error) // immutable after Submit
	val  T                                // written once, before done is closed
	err  error                            // written once, before done is closed
}

// Submit queues fn(ctx) on q and returns its Future. fn runs as a work
// item of q, as GoContext's functions do: with ctx's pprof labels, as a
// region of ctx's trace task under an execution trace, and even if ctx
// ends before it starts (fn sees ctx and decides).
//
// On a queue full under MaxPending, Submit waits for room until ctx is
// done, as GoContext does (pond's Submit on a pool with WithQueueSize).
// When the call is refused, the returned Future is already done with the
// reason, and fn never runs, in this order: an error matching
// ErrInvalidArgument for a nil q or ctx, ErrDestroyed, ErrNoFunc for a
// nil fn ("wq: Submit: nil function"), ctx.Err() when ctx is already
// done or ends while Submit waits for room, and the queue's other
// refusals as Go returns them (ErrDraining, ...; never ErrQueueFull). A
// function that CancelPending dropped before it started leaves the Future
// done with ErrCancelled. A panic in fn is recovered on the worker, which
// goes on serving, and the Future's error is a *PanicError; a
// runtime.Goexit in fn gives an error matching ErrWorkerExit. Panics of
// futures count in the queue's Stats().Panics but do not go to its panic
// handler.
//
// Submit blocks only while the queue is full (see GoContext for the
// rules of that wait); on an unbounded queue it never blocks. It allocates
// the Future and its done channel, and nothing else beyond the caller's
// closure unless it waits. Safe from any goroutine. The kernel has no
// counterpart.
func Submit[T any](q *Workqueue, ctx context.Context, fn func(context.Context) (T, error)) *Future[T] {
	f := &Future[T]{done: make(chan struct{})}
	var zero T
	switch {
	case q == nil:
		f.finish(zero, errNilQueue)
	case ctx == nil:
		f.finish(zero, errNilContext)
	case q.checkDestroyed() != nil:
		f.finish(zero, ErrDestroyed)
	case fn == nil:
		f.finish(zero, errNoFuncSubmit)
	case ctx.Err() != nil:
		f.finish(zero, ctx.Err())
	default:
		f.fn = fn
		it := getGoItem()
		it.task, it.ctx = f, ctx
		if err := q.goQueueWait(ctx, it); err != nil {
			f.finish(zero, err)
		}
	}
	return f
}

// Wait blocks until the function has returned, or ctx is done, whichever
// comes first. It returns the function's value and error (a *PanicError
// if it panicked, the refusal if Submit was refused), or the zero T and
// ctx.Err() when ctx ends first; the function is not affected and the
// Future can be waited for again. A nil ctx returns the zero T and an
// error matching ErrInvalidArgument (use context.Background() for no
// bound). Called
// from inside the future's own function it would wait for itself: it
// returns an error matching ErrDeadlock at once, also when the function
// unlocked the worker's goroutine from its thread and it moved. As with
// Work.Flush, waiting from an item of an ordered queue (or one with
// max_active 1) for a function queued after it on the same queue is a
// deadlock that is not detected; ctx bounds it.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	if ctx == nil {
		var zero T
		return zero, errNilContext
	}
	select {
	case <-f.done:
		return f.val, f.err
	default:
	}
	var zero T
	if f.inOwnFunction() {
		return zero, fmt.Errorf("wq: Future.Wait from inside the future's own function: %w", ErrDeadlock)
	}
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Done returns a channel that is closed once the function has returned
// (or Submit was refused); Wait then returns at once. Never blocks.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

func (f *Future[T]) finish(v T, err error) {
	f.val, f.err = v, err
	close(f.done)
}

// runTask runs the function on its worker (goItem.run).
func (f *Future[T]) runTask(ctx context.Context, it *goItem) {
	var (
		v        T
		err      error
		returned bool
	)
	fn := f.fn
	defer func() {
		if !returned {
			if r := recover(); r != nil {
				err = newPanicError(r)
			} else {
				err = errGoexit
			}
		}
		it.leaveCount() // room on the queue before Wait can return
		f.finish(v, err)
	}()
	v, err = fn(ctx)
	returned = true
}

func (f *Future[T]) taskFunc() any { return f.fn }

func (f *Future[T]) cancelTask(err error) {
	var zero T
	f.finish(zero, err)
}

// inOwnFunction reports whether the caller is the worker running f's
// function, also when its goroutine left the worker's thread
// (selfWorker).
func (f *Future[T]) inOwnFunction() bool {
	wk := selfWorker()
	if wk == nil {
		return false
	}
	w := wk.current // the worker's own field, read on its own goroutine
	if w == nil || !w.oneShot {
		return false
	}
	t, ok := goItemOf(w).task.(*Future[T])
	return ok && t == f
}
