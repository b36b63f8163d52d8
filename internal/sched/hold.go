package sched

import (
	"runtime/metrics"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Holding the P across a short park.
//
// Park enters futex_wait through the runtime's system-call bracket: while
// the thread sleeps, sysmon may give its P to other goroutines (after one
// sysmon tick, 20 us to 10 ms, when no P is idle), and the woken thread
// must then find an idle P or wait in the global run queue. Hold sleeps in
// a raw futex_wait instead, outside the bracket: the goroutine stays
// _Grunning on its P, and a wake-up within the hold runs on at once.
//
// The runtime still reaches the goroutine: a stop-the-world, a GC safe
// point or sysmon's 10 ms preemption signals the thread (SIGURG); the
// futex_wait has a timeout, so the kernel returns EINTR rather than
// restarting it (ERESTART_RESTARTBLOCK), and the next call of holdOnce
// (its stack check) is a synchronous safe point where the runtime
// preempts the goroutine. A stop-the-world therefore waits for the
// signal's delivery, not for the hold. The hold is bounded too: a thread
// that keeps a P it does not use keeps that P from every other goroutine.

// Hold waits up to ns for a token, keeping the caller's P (see above). It
// reports whether it consumed one (Park would then have returned at once
// too); false leaves the Parker as it was (no token, owner running), for
// a Park to follow. ns <= 0 only polls. The caller must be the owner, as
// for Park. It never allocates.
func (p *Parker) Hold(ns int64) bool {
	if p.state.CompareAndSwap(parkToken, parkIdle) {
		return true
	}
	if ns <= 0 {
		return false
	}
	if !p.state.CompareAndSwap(parkIdle, parkSleeping) {
		// The only other transition from idle is to token.
		p.state.Store(parkIdle)
		return true
	}
	deadline := Nanotime() + ns
	for {
		left := deadline - Nanotime()
		if left <= 0 {
			if p.state.CompareAndSwap(parkSleeping, parkIdle) {
				return false
			}
			p.state.Store(parkIdle) // the token came meanwhile
			return true
		}
		holdOnce(p, left)
		if p.state.Load() == parkToken {
			p.state.Store(parkIdle)
			return true
		}
		// Timeout, EINTR (a preemption request) or a spurious wake-up:
		// loop; the call of holdOnce is the safe point.
	}
}

// holdOnce is one raw futex_wait of Hold, bounded by ns. It is a separate
// function (not inlined, with a frame) so that each call has a stack
// check: the safe point at which a pending preemption takes effect. The
// timespec is the Parker's (owned by the parking thread, as for
// ParkStamp).
//
//go:noinline
func holdOnce(p *Parker, ns int64) {
	p.ts = unix.NsecToTimespec(ns)
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&p.state)),
		futexWaitPrivate, parkSleeping, uintptr(unsafe.Pointer(&p.ts)), 0, 0)
}

// YieldPUntil (experiment): gives the caller's P up (entersyscallblock)
// and sleeps in 20 us steps until *flag is non-zero, at most n steps.
func YieldPUntil(flag *atomic.Uint32, n int) { yieldPUntil(flag, n) }

var yieldTs = unix.Timespec{Nsec: 20000}

//go:nosplit
//go:norace
func yieldPUntil(flag *atomic.Uint32, n int) {
	entersyscallblock()
	for i := 0; i < n && flag.Load() == 0; i++ {
		syscall.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&yieldTs)), 0, 0)
	}
	exitsyscall()
}

// NoIdleP (experiment): some goroutine is runnable (runtime/metrics).
func NoIdleP() bool {
	metrics.Read(runnableSample)
	return runnableSample[0].Value.Kind() == metrics.KindUint64 && runnableSample[0].Value.Uint64() > 0
}
