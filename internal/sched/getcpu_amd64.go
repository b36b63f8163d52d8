package sched

import (
	"runtime"
	"sync"
)

// Linux sets each CPU's TSC_AUX register to (node << 12) | cpu, for the
// vDSO's getcpu; RDPID (or RDTSCP, which also reads the time stamp
// counter) returns it without entering the kernel.

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
func rdpid() uint32
func rdtscpAux() uint32

const (
	cpuNone = iota
	cpuRDPID
	cpuRDTSCP
)

var fastCPUOnce sync.Once
var fastCPUKind int

// fastCPU returns the calling thread's CPU from TSC_AUX, if this machine
// has an instruction for it and the value agrees with getcpu(2).
func fastCPU() (int, bool) {
	fastCPUOnce.Do(initFastCPU)
	switch fastCPUKind {
	case cpuRDPID:
		return int(rdpid() & 0xfff), true
	case cpuRDTSCP:
		return int(rdtscpAux() & 0xfff), true
	}
	return 0, false
}

func initFastCPU() {
	maxLeaf, _, _, _ := cpuid(0, 0)
	maxExt, _, _, _ := cpuid(0x80000000, 0)
	var kinds []int
	if maxLeaf >= 7 {
		if _, _, ecx, _ := cpuid(7, 0); ecx&(1<<22) != 0 {
			kinds = append(kinds, cpuRDPID)
		}
	}
	if maxExt >= 0x80000001 {
		if _, _, _, edx := cpuid(0x80000001, 0); edx&(1<<27) != 0 {
			kinds = append(kinds, cpuRDTSCP)
		}
	}
	for _, k := range kinds {
		if agreesWithGetcpu(k) {
			fastCPUKind = k
			return
		}
	}
}

// agreesWithGetcpu checks that the instruction and getcpu(2) report the
// same CPU: a hypervisor that does not virtualise TSC_AUX, or a kernel
// that does not set it, fails the check and getcpu(2) is used. A sample
// counts only when the thread did not move between the two system calls
// around it.
func agreesWithGetcpu(kind int) bool {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	agreed := 0
	for i := 0; i < 64 && agreed < 8; i++ {
		a := getcpuSyscall()
		var b int
		if kind == cpuRDPID {
			b = int(rdpid() & 0xfff)
		} else {
			b = int(rdtscpAux() & 0xfff)
		}
		c := getcpuSyscall()
		if a != c {
			continue
		}
		if a != b {
			return false
		}
		agreed++
	}
	return agreed >= 8
}

func rdfsbase() uint64

var tokenOnce sync.Once
var tokenFS bool

// ThreadToken returns a value that tells the calling thread apart from
// every other live thread of the process. On x86-64 with FSGSBASE enabled
// by the kernel (AT_HWCAP2 bit 1, Linux 5.9+) it is the thread's FS base,
// its TLS pointer, read with RDFSBASE in about a nanosecond; elsewhere the
// thread id, a system call (gettid, 0.2-0.4 us on the virtual machines we
// measured). Compare tokens only with tokens from the same process run.
func ThreadToken() uint64 {
	tokenOnce.Do(func() { tokenFS = hwcap2()&hwcap2FSGSBASE != 0 })
	if tokenFS {
		if fs := rdfsbase(); fs != 0 {
			return fs
		}
	}
	return uint64(Gettid())
}
