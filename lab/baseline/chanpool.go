package baseline

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// ChanPool is a fixed set of worker goroutines receiving functions from one
// buffered channel: the hand-written pool found in most Go code. Items start
// in channel (FIFO) order; with more than one worker they may finish in any
// order. Create it with NewChanPool; the zero value is not usable.
type ChanPool struct {
	gate    gate
	ch      chan func()
	workers sync.WaitGroup // worker goroutines alive
	n       int
	panics  atomic.Uint64
}

// NewChanPool starts workers goroutines reading a channel of capacity
// queueLen (0 makes every Submit wait for a worker to take the item). It
// returns ErrInvalidArgument when workers < 1 or queueLen < 0.
func NewChanPool(workers, queueLen int) (*ChanPool, error) {
	if workers < 1 || queueLen < 0 {
		return nil, fmt.Errorf("%w: chan pool with %d workers and a queue of %d", ErrInvalidArgument, workers, queueLen)
	}
	p := &ChanPool{gate: newGate(), ch: make(chan func(), queueLen), n: workers}
	p.workers.Add(workers)
	for range workers {
		go p.worker()
	}
	return p, nil
}

// Name returns "chan".
func (p *ChanPool) Name() string { return "chan" }

// Workers returns the number of worker goroutines.
func (p *ChanPool) Workers() int { return p.n }

// Submit sends fn on the pool's channel. It blocks while the channel is full
// (until a worker takes an item) and returns nil once fn is queued. It
// returns ErrClosed after Close and ErrNilFunc for a nil fn. Safe from any
// goroutine. A worker that Submits to its own full pool can deadlock, as
// with any bounded queue.
func (p *ChanPool) Submit(fn func()) error {
	if fn == nil {
		return ErrNilFunc
	}
	if !p.gate.enter() {
		return ErrClosed
	}
	p.ch <- fn
	p.gate.exit()
	return nil
}

func (p *ChanPool) worker() {
	normal := false
	defer func() {
		if !normal {
			// The item called runtime.Goexit and took this goroutine with
			// it: start a replacement so the pool keeps its size.
			p.workers.Add(1)
			go p.worker()
		}
		p.workers.Done()
	}()
	for fn := range p.ch {
		p.run(fn)
	}
	normal = true
}

func (p *ChanPool) run(fn func()) {
	defer recoverPanic(&p.panics)
	fn()
}

// Close rejects further Submits, lets the workers drain the channel, and
// blocks until every queued item has run and every worker has exited. Safe
// to call more than once and from any goroutine.
func (p *ChanPool) Close() {
	if p.gate.close() {
		close(p.ch)
		p.workers.Wait()
		p.gate.finish()
	}
}

// Panics returns the number of submitted functions that panicked (and were
// recovered).
func (p *ChanPool) Panics() uint64 { return p.panics.Load() }
