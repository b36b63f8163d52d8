package baseline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/panjf2000/ants/v2"
)

// Ants wraps a github.com/panjf2000/ants/v2 pool in blocking mode: Submit
// hands the function straight to an idle worker goroutine, starts a new one
// while fewer than size exist, and otherwise waits for a worker to become
// free. ants has no queue of its own. Idle workers expire after ants'
// default of 1 s (a purge goroutine reaps them). A panicking function ends
// its worker goroutine; ants recovers it, this wrapper counts it through
// ants' PanicHandler, and a later Submit starts a new worker. Create it with
// NewAnts; the zero value is not usable.
type Ants struct {
	gate   gate
	pool   *ants.Pool
	panics atomic.Uint64
}

// NewAnts returns an ants pool of at most size worker goroutines (started
// on demand). It returns ErrInvalidArgument when size < 1, and ants' own
// error, wrapped, if it refuses the options.
func NewAnts(size int) (*Ants, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: ants pool of size %d", ErrInvalidArgument, size)
	}
	a := &Ants{gate: newGate()}
	p, err := ants.NewPool(size,
		ants.WithNonblocking(false),
		ants.WithPanicHandler(func(any) { a.panics.Add(1) }),
	)
	if err != nil {
		return nil, fmt.Errorf("baseline: ants: %w", err)
	}
	a.pool = p
	return a, nil
}

// Name returns "ants".
func (a *Ants) Name() string { return "ants" }

// Size returns the pool's capacity in worker goroutines.
func (a *Ants) Size() int { return a.pool.Cap() }

// Submit hands fn to an ants worker. It blocks while all size workers are
// busy, until one is free. It returns ErrClosed after Close and ErrNilFunc
// for a nil fn. Safe from any goroutine. A worker that Submits to its own
// busy pool can deadlock, as ants documents for blocking mode.
func (a *Ants) Submit(fn func()) error {
	if fn == nil {
		return ErrNilFunc
	}
	if !a.gate.enter() {
		return ErrClosed
	}
	err := a.pool.Submit(fn)
	a.gate.exit()
	if errors.Is(err, ants.ErrPoolClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// Close rejects further Submits, then releases the ants pool and blocks
// until every worker, including those still running a function, and ants'
// purge and clock goroutines have exited. Safe to call more than once and
// from any goroutine.
func (a *Ants) Close() {
	if a.gate.close() {
		// With no Submit in flight every accepted function is held by a
		// counted worker, so ReleaseContext returns once they have all run.
		_ = a.pool.ReleaseContext(context.Background())
		a.gate.finish()
	}
}

// Panics returns the number of submitted functions that panicked (and were
// recovered by ants). ants counts a worker as done before it calls its
// panic handler, so the count of the last panics may trail Close by a few
// instructions of that worker.
func (a *Ants) Panics() uint64 { return a.panics.Load() }
