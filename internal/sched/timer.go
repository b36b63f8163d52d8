package sched

import (
	"math"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// System calls of the RT timer thread (package internal/timer): an
// absolute-deadline park on the Parker's futex word, and the monotonic
// clock it is read against.

// futex(2) operation for an absolute CLOCK_MONOTONIC timeout.
const (
	futexWaitBitsetPrivate = 9 | 128    // FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG
	futexBitsetMatchAny    = 0xffffffff // FUTEX_BITSET_MATCH_ANY
)

// ParkUntil is Park bounded by an absolute deadline on CLOCK_MONOTONIC in
// ns (deadlineNs < 0: no bound, as Park). It reports whether a token was
// consumed (true) or the deadline passed first (false). It is one
// futex(FUTEX_WAIT_BITSET) system call with the absolute time, so a
// SCHED_FIFO caller (whose hrtimer has no slack) returns within the
// kernel's wake-up latency of the deadline, and an Unpark issued by any
// thread before or during the wait ends it at once. Blocks the calling
// thread.
func (p *Parker) ParkUntil(deadlineNs int64) bool {
	if deadlineNs < 0 {
		p.park(-1)
		return true
	}
	if p.state.CompareAndSwap(parkToken, parkIdle) {
		return true
	}
	if !p.state.CompareAndSwap(parkIdle, parkSleeping) {
		p.state.Store(parkIdle)
		return true
	}
	parkedThreads.Add(1)
	defer parkedThreads.Add(-1)
	ts := unix.NsecToTimespec(deadlineNs)
	for {
		// FUTEX_WAIT_BITSET returns at once if the word is no longer
		// parkSleeping; its timeout is absolute on CLOCK_MONOTONIC.
		_, _, e := syscall.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
			futexWaitBitsetPrivate, parkSleeping,
			uintptr(unsafe.Pointer(&ts)), 0, futexBitsetMatchAny)
		if p.state.Load() == parkToken {
			p.state.Store(parkIdle)
			return true
		}
		if e == unix.ETIMEDOUT || MonotonicNs() >= deadlineNs {
			if p.state.CompareAndSwap(parkSleeping, parkIdle) {
				return false
			}
			p.state.Store(parkIdle) // a token came meanwhile
			return true
		}
		// Spurious wake-up or EINTR (Go's preemption signals): loop.
	}
}

// monoEpoch pairs a time.Time, whose monotonic reading Go takes through the
// vDSO, with CLOCK_MONOTONIC read after it, so that MonoNow costs one vDSO
// call and is never behind CLOCK_MONOTONIC: a deadline computed from it
// never expires early. Of a few pairings, the tightest is kept, so MonoNow
// is ahead by at most one clock_gettime system call (well under 1 us),
// which is how late ParkUntil may return for a MonoNow deadline.
var monoEpoch, monoEpochNs = pairMonoEpoch()

func pairMonoEpoch() (time.Time, int64) {
	var epoch time.Time
	var ns int64
	gap := int64(math.MaxInt64)
	for range 8 {
		before := MonotonicNs()
		t := time.Now()
		after := MonotonicNs()
		if after-before < gap {
			gap, epoch, ns = after-before, t, after
		}
	}
	return epoch, ns
}

// MonoNow returns CLOCK_MONOTONIC in ns, the clock of ParkUntil, without a
// system call. It never reads earlier than CLOCK_MONOTONIC.
func MonoNow() int64 { return int64(time.Since(monoEpoch)) + monoEpochNs }
