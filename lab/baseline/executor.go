package baseline

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Executor runs submitted functions asynchronously.
//
// Implementations in this package are safe for use from any goroutine.
type Executor interface {
	// Name returns the executor's short name, as accepted by New: "go",
	// "chan", "ants" or "pond".
	Name() string
	// Submit hands fn over to run asynchronously. It blocks only as long as
	// the hand-off needs (ChanPool: while its queue is full; Ants: while
	// all its workers are busy) and returns nil once fn is accepted, which
	// means fn will run exactly once. It returns ErrClosed after (or
	// racing with) Close, and ErrNilFunc for a nil fn; it never panics.
	Submit(fn func()) error
	// Close stops accepting work, waits for every accepted fn to finish and
	// for the executor's goroutines to exit, then returns. It blocks as long
	// as the slowest accepted fn runs. Calling it again waits the same way
	// and then returns.
	Close()
}

var (
	// ErrClosed is returned by Submit after Close.
	ErrClosed = errors.New("baseline: executor closed")
	// ErrNilFunc is returned by Submit for a nil function.
	ErrNilFunc = errors.New("baseline: nil function submitted")
	// ErrInvalidArgument is returned by the constructors for a worker count
	// below 1 or a negative queue length.
	ErrInvalidArgument = errors.New("baseline: invalid argument")
	// ErrUnknown is returned by New for a name that is not in Names().
	ErrUnknown = errors.New("baseline: unknown executor")
)

// DefaultQueueLen is the channel capacity New gives a ChanPool: 1024 items.
const DefaultQueueLen = 1024

// Names returns the names New accepts, in a fixed order: "go", "chan",
// "ants", "pond".
func Names() []string { return []string{"go", "chan", "ants", "pond"} }

// New returns the executor called name with the given number of workers:
// NewGoStmt() for "go" (workers is ignored), NewChanPool(workers,
// DefaultQueueLen) for "chan", NewAnts(workers) for "ants" and
// NewPond(workers) for "pond". It returns ErrUnknown for any other name and
// ErrInvalidArgument for workers < 1 (except for "go").
func New(name string, workers int) (Executor, error) {
	switch name {
	case "go":
		return NewGoStmt(), nil
	case "chan":
		return NewChanPool(workers, DefaultQueueLen)
	case "ants":
		return NewAnts(workers)
	case "pond":
		return NewPond(workers)
	}
	return nil, fmt.Errorf("%w: %q (want one of %v)", ErrUnknown, name, Names())
}

// gate lets Submit calls in and lets Close wait until none is in flight.
// state holds closedBit and the number of Submit calls past the gate.
type gate struct {
	state   atomic.Int64
	drained chan struct{} // cap 1; signalled when the count drops to 0 while closed
	done    chan struct{} // closed when the first Close has finished
}

const closedBit = 1 << 62

func newGate() gate {
	return gate{drained: make(chan struct{}, 1), done: make(chan struct{})}
}

// enter admits a Submit; false means closed (and nothing to undo).
func (g *gate) enter() bool {
	if g.state.Add(1)&closedBit != 0 {
		g.exit()
		return false
	}
	return true
}

// exit ends a Submit admitted by enter.
func (g *gate) exit() {
	if g.state.Add(-1) == closedBit {
		select {
		case g.drained <- struct{}{}:
		default:
		}
	}
}

// close marks the gate closed and waits until no admitted Submit is in
// flight. It returns false when another Close came first; that caller has
// then already waited for g.done.
func (g *gate) close() bool {
	old := g.state.Or(closedBit)
	if old&closedBit != 0 {
		<-g.done
		return false
	}
	if old != 0 {
		// Submits admitted before the Or are in flight; the last one to
		// leave brings the count to zero and signals. Later enter calls see
		// closedBit and never hand anything off.
		<-g.drained
	}
	return true
}

// finish releases the callers of close that came second.
func (g *gate) finish() { close(g.done) }
