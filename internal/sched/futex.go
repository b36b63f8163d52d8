package sched

import (
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Parker is the wake primitive of gowq's workers: a futex word that one
// thread sleeps on and any thread wakes. Unlike a Go channel, mutex or
// sync.Cond, an Unpark is delivered by the kernel straight to the parked
// thread (futex_wake), which the kernel then schedules at the parked thread's
// own policy and priority: a SCHED_FIFO worker wakes at RT latency even when
// every other thread of the process is starved. See docs/design.md, "The
// wake path".
//
// A Parker has one parker (the owning thread) and any number of unparkers.
// An Unpark that comes before Park makes the next Park return at once (a
// token, like a binary semaphore). The zero value is ready to use; it must
// not be copied after first use.
type Parker struct {
	// state is the futex word: parkIdle, parkSleeping or parkToken.
	state atomic.Uint32 // atomic
	// ts is ParkStamp's clock reading; owned by the parking thread.
	ts unix.Timespec
	// ticks is ParkWait's counter reading (parkwait.go); owned by the
	// parking thread.
	ticks int64
}

// futex(2) operations; x/sys/unix does not define them.
const (
	futexWaitPrivate = 0 | 128 // FUTEX_WAIT | FUTEX_PRIVATE_FLAG
	futexWakePrivate = 1 | 128 // FUTEX_WAKE | FUTEX_PRIVATE_FLAG
)

const (
	parkIdle     = 0 // owner running, no token
	parkSleeping = 1 // owner is (about to be) in futex_wait
	parkToken    = 2 // an Unpark is pending
)

// Park blocks the calling thread in futex_wait until Unpark is called, or
// returns at once if a token is pending. It consumes the token. The wait is a
// blocking system call: the Go runtime hands the caller's P to other
// goroutines while it sleeps and the thread needs a P again on return.
func (p *Parker) Park() {
	p.park(-1)
}

// ParkTimeout is Park bounded by d (d <= 0 polls). It reports whether a
// token was consumed (true) or the time ran out (false).
func (p *Parker) ParkTimeout(d time.Duration) bool {
	if d <= 0 {
		return p.state.CompareAndSwap(parkToken, parkIdle)
	}
	return p.park(d)
}

// parkedThreads counts the Parkers' owners in their futex wait (or about
// to enter or just out of it): each is a goroutine in a system call, and
// every owner gowq starts is a GoLocked one.
var parkedThreads atomic.Int64

// ParkedThreads returns how many goroutines wait in a Parker now (or are
// about to, or just woke): the Go runtime counts them as goroutines not in
// Go, and gowq's are locked to their threads (LockedThreads). Safe from
// any goroutine; an atomic load.
func ParkedThreads() int { return int(parkedThreads.Load()) }

func (p *Parker) park(d time.Duration) bool {
	// Fast path: a token is already there.
	if p.state.CompareAndSwap(parkToken, parkIdle) {
		return true
	}
	if !p.state.CompareAndSwap(parkIdle, parkSleeping) {
		// The only other transition from idle is to token.
		p.state.Store(parkIdle)
		return true
	}
	parkedThreads.Add(1)
	defer parkedThreads.Add(-1)
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	for {
		var tsp *unix.Timespec
		var ts unix.Timespec
		if d > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				if p.state.CompareAndSwap(parkSleeping, parkIdle) {
					return false
				}
				p.state.Store(parkIdle)
				return true
			}
			ts = unix.NsecToTimespec(int64(left))
			tsp = &ts
		}
		// FUTEX_WAIT returns at once if the word is no longer parkSleeping.
		syscall.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
			futexWaitPrivate, parkSleeping,
			uintptr(unsafe.Pointer(tsp)), 0, 0)
		if p.state.Load() == parkToken {
			p.state.Store(parkIdle)
			return true
		}
		// Spurious wake-up, EINTR (Go's preemption signals) or timeout: loop.
	}
}

// Unpark gives the owner a token and wakes it if it sleeps. It never blocks
// and is safe from any goroutine; it makes a system call only when the owner
// is actually asleep. It reports whether a futex_wake was issued.
func (p *Parker) Unpark() bool {
	if p.state.Swap(parkToken) != parkSleeping {
		return false
	}
	// RawSyscall: futex_wake never blocks, so there is no need to hand off
	// the P. The woken thread may preempt us at once if it has a higher
	// policy; that is the point.
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
		futexWakePrivate, 1, 0, 0, 0)
	return true
}

// Sleeping reports whether the owner is parked (or about to park) with no
// token pending.
func (p *Parker) Sleeping() bool { return p.state.Load() == parkSleeping }
