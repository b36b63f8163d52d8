package baseline

import (
	"errors"
	"fmt"

	"github.com/alitto/pond/v2"
)

// Pond wraps a github.com/alitto/pond/v2 pool with its defaults: an
// unbounded queue, at most size worker goroutines, each started on demand
// and exiting as soon as the queue is empty, and panic recovery on. pond
// also replaces a worker whose function called runtime.Goexit. Create it
// with NewPond; the zero value is not usable.
type Pond struct {
	gate gate
	pool pond.Pool
	size int
}

// NewPond returns a pond pool of at most size worker goroutines. It returns
// ErrInvalidArgument when size < 1 (pond itself would read 0 as "no limit"
// and panic on a negative size).
func NewPond(size int) (*Pond, error) {
	if size < 1 {
		return nil, fmt.Errorf("%w: pond pool of size %d", ErrInvalidArgument, size)
	}
	return &Pond{gate: newGate(), pool: pond.NewPool(size), size: size}, nil
}

// Name returns "pond".
func (p *Pond) Name() string { return "pond" }

// Size returns the pool's maximum concurrency in worker goroutines.
func (p *Pond) Size() int { return p.size }

// Submit queues fn with pond's Go. It does not block beyond pond's queue
// lock (the queue is unbounded). It returns ErrClosed after Close and
// ErrNilFunc for a nil fn. Safe from any goroutine.
func (p *Pond) Submit(fn func()) error {
	if fn == nil {
		return ErrNilFunc
	}
	if !p.gate.enter() {
		return ErrClosed
	}
	err := p.pool.Go(fn)
	p.gate.exit()
	if errors.Is(err, pond.ErrPoolStopped) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// Close rejects further Submits and blocks in pond's StopAndWait until the
// queue is empty and every worker has exited. Safe to call more than once
// and from any goroutine.
func (p *Pond) Close() {
	if p.gate.close() {
		p.pool.StopAndWait()
		p.gate.finish()
	}
}

// Panics returns the number of submitted functions that failed in pond:
// those that panicked (pond recovers them) and those that called
// runtime.Goexit.
func (p *Pond) Panics() uint64 { return p.pool.FailedTasks() }
