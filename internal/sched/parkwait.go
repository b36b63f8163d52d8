package sched

import (
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ParkWait is Park (with handOff, ParkHandOff) that also measures the thread's wait for a P: when it
// slept, it returns the time (ns) from the futex's return to the moment
// the calling goroutine runs Go code again (exitsyscall done), and true.
// Where the time-stamp counter is the kernel's clocksource (synchronised
// and constant-rate: "tsc" in /sys/devices/system/clocksource), the stamp
// in the system-call window is one RDTSC instruction (about 20 ns),
// converted with a rate calibrated against Nanotime; elsewhere, and until
// the rate is calibrated (the first 20 ms after the first call), it is
// ParkStamp's raw clock_gettime system call (0.1-0.5 us). Never allocates.
func (p *Parker) ParkWait(handOff bool) (waitNs int64, slept bool) {
	if !tscUsable() {
		var woken int64
		p.parkStampMode(&woken, handOff)
		if woken == 0 {
			return 0, false
		}
		return max(0, Nanotime()-woken), true
	}
	if p.state.CompareAndSwap(parkToken, parkIdle) {
		return 0, false
	}
	if !p.state.CompareAndSwap(parkIdle, parkSleeping) {
		p.state.Store(parkIdle)
		return 0, false
	}
	parkedThreads.Add(1)
	defer parkedThreads.Add(-1)
	for {
		if handOff {
			futexWaitTicksHandOff(unsafe.Pointer(&p.state), &p.ticks)
		} else {
			futexWaitTicks(unsafe.Pointer(&p.state), &p.ticks)
		}
		if p.state.Load() == parkToken {
			p.state.Store(parkIdle)
			break
		}
	}
	d := int64(rdtsc()) - p.ticks
	return max(0, int64(float64(d)*math.Float64frombits(tscNsPerTick.Load()))), true
}

// futexWaitTicks is futexWaitStamp with the counter read instead of the
// clock (see futexWaitStamp for the rules of the window).
//
//go:nosplit
//go:norace
func futexWaitTicks(addr unsafe.Pointer, out *int64) {
	entersyscall()
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(addr), futexWaitPrivate, parkSleeping, 0, 0, 0)
	*out = int64(rdtsc())
	exitsyscall()
}

// futexWaitTicksHandOff is futexWaitTicks entered through
// entersyscallblock: the P is handed off before the futex (ParkHandOff).
//
//go:nosplit
//go:norace
func futexWaitTicksHandOff(addr unsafe.Pointer, out *int64) {
	entersyscallblock()
	syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(addr), futexWaitPrivate, parkSleeping, 0, 0, 0)
	*out = int64(rdtsc())
	exitsyscall()
}

// The counter's rate, calibrated once against Nanotime over at least
// tscCalibrateNs, then frozen (float64 bits, ns per tick; 0 until then).
var (
	tscOnce      sync.Once
	tscOK        bool // the counter is the kernel's clocksource (and this CPU has RDTSC)
	tscBaseNs    int64
	tscBaseTicks uint64
	tscNsPerTick atomic.Uint64
)

const tscCalibrateNs = 20e6

// tscUsable reports whether ParkWait may stamp with the counter now.
func tscUsable() bool {
	if tscNsPerTick.Load() != 0 {
		return true
	}
	tscOnce.Do(func() {
		b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
		tscOK = err == nil && strings.TrimSpace(string(b)) == "tsc" && haveRDTSC
		tscBaseNs, tscBaseTicks = Nanotime(), rdtsc()
	})
	if !tscOK {
		return false
	}
	ns, t := Nanotime(), rdtsc()
	if dn := ns - tscBaseNs; dn >= tscCalibrateNs && t > tscBaseTicks {
		tscNsPerTick.CompareAndSwap(0, math.Float64bits(float64(dn)/float64(t-tscBaseTicks)))
		return true
	}
	return false
}
