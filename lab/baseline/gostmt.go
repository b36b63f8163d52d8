package baseline

import (
	"sync"
	"sync/atomic"
)

// GoStmt runs every submitted function on a goroutine of its own, started
// by a `go` statement in Submit. It has no limit on concurrency and no queue
// other than the Go scheduler's run queues. Create it with NewGoStmt; the
// zero value is not usable.
type GoStmt struct {
	gate   gate
	wg     sync.WaitGroup // accepted items not yet finished
	panics atomic.Uint64
}

// NewGoStmt returns a GoStmt executor. It starts no goroutine.
func NewGoStmt() *GoStmt { return &GoStmt{gate: newGate()} }

// Name returns "go".
func (g *GoStmt) Name() string { return "go" }

// Submit starts fn on a new goroutine and returns nil without waiting for
// it; it does not block. It returns ErrClosed after Close and ErrNilFunc for
// a nil fn. Safe from any goroutine.
func (g *GoStmt) Submit(fn func()) error {
	if fn == nil {
		return ErrNilFunc
	}
	if !g.gate.enter() {
		return ErrClosed
	}
	g.wg.Add(1)
	go g.run(fn)
	g.gate.exit()
	return nil
}

func (g *GoStmt) run(fn func()) {
	defer g.wg.Done()
	defer recoverPanic(&g.panics)
	fn()
}

// recoverPanic counts a panic of the item it guards. It is deferred
// directly, so recover works; during runtime.Goexit it finds nothing.
func recoverPanic(n *atomic.Uint64) {
	if recover() != nil {
		n.Add(1)
	}
}

// Close rejects further Submits and blocks until every started goroutine
// has returned. Safe to call more than once and from any goroutine.
func (g *GoStmt) Close() {
	if g.gate.close() {
		g.wg.Wait()
		g.gate.finish()
	}
}

// Panics returns the number of submitted functions that panicked (and were
// recovered).
func (g *GoStmt) Panics() uint64 { return g.panics.Load() }
