package sched

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The runtime's system call bracket and clock, which it exports for
// linkname (go.dev/issue/67401). parkstamp.s lets these bodyless
// declarations compile.

//go:linkname entersyscall runtime.entersyscall
func entersyscall()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

//go:linkname runtimeNanotime runtime.nanotime
func runtimeNanotime() int64

// Nanotime returns CLOCK_MONOTONIC in ns, read through the vDSO (about
// 20 ns, no system call): the clock of ParkStamp's stamp. Never blocks.
func Nanotime() int64 { return runtimeNanotime() }

// ParkStamp is Park that also writes to *out the time (CLOCK_MONOTONIC ns,
// as Nanotime) at which the thread came back from futex_wait, before it
// asks the Go runtime for a P again: the time from *out to the caller's
// next Nanotime is the thread's wait for a P. *out is left as it was when
// Park would not sleep (a token was pending). It costs one raw
// clock_gettime system call (0.1-0.5 us) per wake-up more than Park; use
// Park when nobody reads the stamp. out must point to memory that stays
// valid (not a stack variable of a goroutine other than the caller's) and
// is written by the calling thread only.
func (p *Parker) ParkStamp(out *int64) { p.parkStampMode(out, false) }

// futexWaitStamp is syscall.Syscall6(SYS_FUTEX, FUTEX_WAIT) with a raw
// clock_gettime between the futex's return and exitsyscall, which is where
// the thread may wait for a P. Between entersyscall and exitsyscall
// nothing may allocate, grow the stack or write a pointer: hence nosplit,
// and the timespec in the Parker (owned by the parking thread) rather than
// a local the compiler might move to the heap; norace, so that -race adds
// no calls into its runtime there.
//
//go:nosplit
//go:norace
func futexWaitStamp(addr unsafe.Pointer, ts *unix.Timespec, out *int64) {
	entersyscall()
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(addr), futexWaitPrivate, parkSleeping, 0, 0, 0)
	syscall.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(ts)), 0)
	*out = int64(ts.Sec)*1e9 + int64(ts.Nsec)
	exitsyscall()
}
