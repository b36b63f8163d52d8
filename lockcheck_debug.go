//go:build wqdebug

package wq

import (
	"strconv"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// lockdep is true in wqdebug builds: the pool lock's holder is checked.
const lockdep = true

// lockOwner is the goroutine id of the pool lock's holder, 0 when free
// (wqdebug builds). Set after the lock is taken, cleared before it is
// released, so that a holder always finds its own id.
type lockOwner struct{ g atomic.Int64 }

func (o *lockOwner) set() {
	if id, ok := sched.GoroutineID(); ok {
		o.g.Store(id)
	}
}

func (o *lockOwner) clear() { o.g.Store(0) }

// assertHeld panics unless the calling goroutine holds p's lock, as
// lockdep_assert_held(&pool->lock) warns in the kernel. Where the
// goroutine id cannot be read it checks nothing.
func (p *pool) assertHeld() {
	id, ok := sched.GoroutineID()
	if !ok {
		return
	}
	if h := p.mu.held.g.Load(); h != id {
		panic(lockNotHeld{holder: h, caller: id})
	}
}

// lockNotHeld is assertHeld's panic value.
type lockNotHeld struct{ holder, caller int64 }

func (e lockNotHeld) Error() string {
	return "wq: pool lock not held by the caller (goroutine " + strconv.FormatInt(e.caller, 10) + "; holder " + strconv.FormatInt(e.holder, 10) + ", 0: free)"
}
