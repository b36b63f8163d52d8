package timer

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// RT is an RT timer base: one SCHED_FIFO thread of this process, at the
// base's priority and pinned to the base's CPU when the process may run
// there, that runs the functions of the timers armed on it when they
// expire. Get one with RTSet.On. Lock order: a caller's own locks (the
// item's, the queue's), then mu; the thread never holds mu while it runs
// a timer's function.
type RT struct {
	prio     int
	cpu      int
	reserveP bool // immutable: the set's first base, whose thread reserves the set's P

	mu   sync.Mutex
	heap []*Timer // guarded by mu: min-heap on Timer.when
	quit bool     // guarded by mu: the last reference is gone; exit once the heap is empty
	// sleepUntil is the deadline the thread sleeps (or is about to sleep)
	// for: 0 while it is awake and will look at the heap again before
	// sleeping, math.MaxInt64 when it sleeps with no deadline. An arming
	// wakes it only when its deadline is earlier. guarded by mu.
	sleepUntil int64

	parker sched.Parker // the thread's futex word
	tidv   atomic.Int64 // the thread's tid, 0 before it starts and after it exits
	done   chan struct{}

	fired   atomic.Uint64          // functions run
	wakeups atomic.Uint64          // futex wakes issued by arming
	classE  atomic.Pointer[string] // why the thread could not get its class, or nil
	ready   atomic.Bool            // the first thread has its name, affinity and class
}

func (b *RT) tid() int { return int(b.tidv.Load()) }

// Stats returns how many timer functions the base ran and how many times
// an arming woke its thread (for tests and diagnostics).
func (b *RT) Stats() (fired, wakeups uint64) { return b.fired.Load(), b.wakeups.Load() }

// ClassErr returns why the thread could not be given SCHED_FIFO at the
// base's priority ("" when it was): the timers then still fire, at the
// thread's inherited class.
func (b *RT) ClassErr() string {
	if p := b.classE.Load(); p != nil {
		return *p
	}
	return ""
}

// Prio returns the base's SCHED_FIFO priority.
func (b *RT) Prio() int { return b.prio }

// CPU returns the CPU the base fires on.
func (b *RT) CPU() int { return b.cpu }

// Ready reports whether the base's thread has been given its name,
// affinity and class (or failed to get its class: ClassErr).
func (b *RT) Ready() bool { return b.ready.Load() }

// TID returns the base's thread id, 0 while none runs.
func (b *RT) TID() int { return b.tid() }

// add arms t at deadline when (CLOCK_MONOTONIC ns) and wakes the thread
// if t is now the earliest timer and earlier than what it sleeps for.
func (b *RT) add(t *Timer, when int64) {
	b.mu.Lock()
	t.when = when
	t.idx = len(b.heap)
	b.heap = append(b.heap, t)
	b.up(t.idx)
	wake := t.idx == 0 && b.sleepUntil != 0 && when < b.sleepUntil
	if wake {
		b.sleepUntil = 0 // one wake is enough
	}
	b.mu.Unlock()
	if wake {
		b.wakeups.Add(1)
		b.parker.Unpark()
	}
}

// del removes t from the heap if it is there. The thread is not woken: if
// t was the earliest, it wakes at t's deadline, finds the next one and
// sleeps again.
func (b *RT) del(t *Timer) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.idx < 0 {
		return false
	}
	b.remove(t.idx)
	return true
}

// threadMain is the body of the base's thread (sched.GoLocked). first is
// false for a thread that replaces one whose timer function called
// runtime.Goexit.
func (b *RT) threadMain(first bool) {
	b.tidv.Store(int64(sched.Gettid()))
	b.setup()
	b.ready.Store(true)
	if first && b.reserveP {
		// As each RT pool does: a P kept free, so that the thread finds
		// one when the futex wakes it under load. One per set: the
		// set's threads are pinned to different CPUs, where the RT
		// workers they wake hold spare Ps of their own. Given back on
		// exit.
		sched.ReserveP(1)
	}
	clean := false
	defer func() {
		if clean {
			if b.reserveP {
				sched.ReserveP(-1)
			}
			b.tidv.Store(0)
			close(b.done)
			return
		}
		// A timer function called runtime.Goexit (or panicked, which
		// ends the process anyway): this locked thread dies with its
		// goroutine; a new one takes over the heap.
		b.tidv.Store(0)
		b.respawn()
	}()
	b.loop()
	clean = true
}

// respawnRetry is how often a base whose replacement thread the thread
// gate refused tries again. Its timers fire late meanwhile, never early
// and never lost.
const respawnRetry = 10 * time.Millisecond

// respawn starts a thread to take over the heap from one that ended in a
// timer function. If the thread gate refuses (a thread limit is near), it
// tries again every respawnRetry from a Go timer, until it succeeds or the
// base is released with an empty heap (then it ends the base as its
// thread would have).
func (b *RT) respawn() {
	if sched.GoLocked(func() { b.threadMain(false) }) == nil {
		return
	}
	b.mu.Lock()
	over := b.quit && len(b.heap) == 0
	b.mu.Unlock()
	if over {
		if b.reserveP {
			sched.ReserveP(-1)
		}
		close(b.done)
		return
	}
	time.AfterFunc(respawnRetry, b.respawn)
}

// setup gives the calling (locked, new) thread the base's CPU as its
// affinity (the process's CPUs if the process may not run there), the
// base's name ("ktimers/<cpu>:F<prio>"), SCHED_FIFO at the base's
// priority, and a timer slack of 1 ns.
func (b *RT) setup() {
	if sched.SetAffinity(0, []int{b.cpu}) != nil {
		_ = sched.ResetThread(0) // the process's CPUs, not those of the thread that spawned it
	}
	_ = sched.SetName(fmt.Sprintf("ktimers/%d:F%d", b.cpu, b.prio))
	_ = sched.SetTimerSlack(1)
	if err := sched.SetAttr(0, sched.Attr{Policy: sched.PolicyFIFO, Priority: b.prio}); err != nil {
		s := err.Error()
		b.classE.Store(&s)
	}
}

// loop runs expired timers and sleeps until the next deadline, or with
// no deadline while the heap is empty; it returns once the base is
// released and its heap is empty.
func (b *RT) loop() {
	b.mu.Lock()
	for {
		b.sleepUntil = 0
		if len(b.heap) == 0 {
			if b.quit {
				b.mu.Unlock()
				return
			}
			b.sleepUntil = math.MaxInt64
			b.mu.Unlock()
			b.parker.Park()
			b.mu.Lock()
			continue
		}
		t := b.heap[0]
		if t.when > sched.MonoNow() {
			dl := t.when
			b.sleepUntil = dl
			b.mu.Unlock()
			b.parker.ParkUntil(dl)
			b.mu.Lock()
			continue
		}
		b.remove(0)
		b.mu.Unlock()
		t.fn()
		b.fired.Add(1)
		b.mu.Lock()
	}
}

// Heap operations; called with mu held.

func (b *RT) less(i, j int) bool { return b.heap[i].when < b.heap[j].when }

func (b *RT) swap(i, j int) {
	h := b.heap
	h[i], h[j] = h[j], h[i]
	h[i].idx = i
	h[j].idx = j
}

func (b *RT) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !b.less(i, p) {
			return
		}
		b.swap(i, p)
		i = p
	}
}

func (b *RT) down(i int) {
	n := len(b.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && b.less(r, l) {
			m = r
		}
		if !b.less(m, i) {
			return
		}
		b.swap(i, m)
		i = m
	}
}

// remove takes the timer at index i off the heap and marks it unarmed.
func (b *RT) remove(i int) {
	h := b.heap
	last := len(h) - 1
	t := h[i]
	if i != last {
		b.swap(i, last)
	}
	h[last] = nil
	b.heap = h[:last]
	if i != last {
		b.down(i)
		b.up(i)
	}
	t.idx = -1
}
