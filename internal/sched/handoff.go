package sched

import (
	"runtime/metrics"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Handing the P off at park.
//
// A goroutine readied by a work function (a channel send, a sync
// primitive, a Flush waiter) goes to the worker's P: into its runnext
// slot, to run next on that P. The worker's goroutine is locked to its
// thread, so it cannot run it; the runtime wakes another thread (wakep)
// to steal it. When that steal misses (the thief found the P still
// running, or raced with the readying), the goroutine stays in the P
// while the worker parks in futex_wait, and a plain blocking system call
// (entersyscall) keeps the P attached to the parked thread until sysmon
// takes it back: one sysmon tick, 20 us growing to 10 ms on a quiet
// process. entersyscallblock gives the P up before the futex instead
// (handoffp: a P with runnable goroutines gets a thread at once), but
// costs the worker its P: a wake-up must then find an idle one, which
// raised the idle queue->start p50 when done at every park
// (docs/decisions.md, "Round trip and cache_shard"). So the worker hands
// the P off only when it may hold runnable goroutines (RunnableBehind).

// The runtime's blocking-syscall bracket and sync.Mutex's spin test,
// exported for linkname (go.dev/issue/67401).

//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname syncCanSpin sync.runtime_canSpin
func syncCanSpin(i int) bool

// runnableSample is RunnableBehind's metrics.Read argument; metrics.Read
// serializes its callers (the runtime's metrics semaphore), and the
// value is read at once, so one shared sample is enough.
var runnableSample = []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}

// RunnableBehind reports whether the caller's P may hold runnable
// goroutines that no other thread is about to run, so that a thread about
// to block should hand the P off (ParkHandOff) rather than keep it in the
// system-call state. False is certain when the runtime's own spin test
// says so (sync.runtime_canSpin: the P's run queue and runnext are empty
// and another P is running), which costs a few loads; otherwise it reads
// the runtime's count of runnable goroutines (runtime/metrics, about
// 0.2 us, under the runtime's scheduler lock) and reports whether it is
// above zero: a goroutine runnable elsewhere makes it true too, at the
// cost of a hand-off that was not needed. It may block briefly on the
// runtime's metrics semaphore while another goroutine reads metrics.
// Safe from any goroutine; meaningful from a goroutine locked to its
// thread that is about to block.
func RunnableBehind() bool {
	if syncCanSpin(0) {
		return false
	}
	metrics.Read(runnableSample)
	return runnableSample[0].Value.Kind() == metrics.KindUint64 && runnableSample[0].Value.Uint64() > 0
}

// ParkHandOff is Park that gives the caller's P back to the runtime
// before it sleeps (runtime.entersyscallblock), so that goroutines
// runnable on that P start on another thread at once instead of waiting
// for sysmon. On return the thread needs an idle P, as after any
// blocking system call. Same token rules and callers as Park.
func (p *Parker) ParkHandOff() { p.parkStampMode(nil, true) }

// ParkStampHandOff is ParkStamp with ParkHandOff's hand-off.
func (p *Parker) ParkStampHandOff(out *int64) { p.parkStampMode(out, true) }

// parkStampMode is ParkStamp's loop; block selects the hand-off, and a nil
// out the plain wait of ParkHandOff.
func (p *Parker) parkStampMode(out *int64, block bool) {
	if p.state.CompareAndSwap(parkToken, parkIdle) {
		return
	}
	if !p.state.CompareAndSwap(parkIdle, parkSleeping) {
		p.state.Store(parkIdle)
		return
	}
	parkedThreads.Add(1)
	defer parkedThreads.Add(-1)
	for {
		if block {
			futexWaitHandOff(unsafe.Pointer(&p.state), &p.ts, out)
		} else {
			futexWaitStamp(unsafe.Pointer(&p.state), &p.ts, out)
		}
		if p.state.Load() == parkToken {
			p.state.Store(parkIdle)
			return
		}
		// Spurious wake-up or EINTR (Go's preemption signals): loop.
	}
}

// futexWaitHandOff is futexWaitStamp entered through entersyscallblock:
// the P is handed off before the futex; with a nil out it reads no clock.
// Same constraints (nosplit, norace, no allocation or pointer write
// between the brackets).
//
//go:nosplit
//go:norace
func futexWaitHandOff(addr unsafe.Pointer, ts *unix.Timespec, out *int64) {
	entersyscallblock()
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(addr), futexWaitPrivate, parkSleeping, 0, 0, 0)
	if out != nil {
		syscall.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(ts)), 0)
		*out = int64(ts.Sec)*1e9 + int64(ts.Nsec)
	}
	exitsyscall()
}
