package sched

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Policy is a Linux scheduling policy (sched(7)).
type Policy int

// The scheduling policies gowq uses. Values are the kernel's SCHED_* numbers.
const (
	PolicyNormal Policy = unix.SCHED_NORMAL // SCHED_OTHER, weighted by nice
	PolicyFIFO   Policy = unix.SCHED_FIFO   // real-time, first in first out
	PolicyRR     Policy = unix.SCHED_RR     // real-time, round robin
	PolicyBatch  Policy = unix.SCHED_BATCH
	PolicyIdle   Policy = unix.SCHED_IDLE
)

// String returns the policy name as chrt(1) prints it, e.g. "SCHED_FIFO".
func (p Policy) String() string {
	switch p {
	case PolicyNormal:
		return "SCHED_OTHER"
	case PolicyFIFO:
		return "SCHED_FIFO"
	case PolicyRR:
		return "SCHED_RR"
	case PolicyBatch:
		return "SCHED_BATCH"
	case PolicyIdle:
		return "SCHED_IDLE"
	}
	return "SCHED_" + strconv.Itoa(int(p))
}

// ErrPermission is returned when the kernel refuses a policy, priority or
// nice change for lack of privilege (EPERM).
var ErrPermission = errors.New("sched: operation not permitted")

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("%s: %w (%w)", op, ErrPermission, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// Gettid returns the calling thread's id. It does not block.
func Gettid() int { return unix.Gettid() }

// GetCPU returns the CPU the calling thread runs on at this instant, or 0
// if it cannot tell. The answer may be stale as soon as it returns unless
// the thread's affinity pins it. On x86-64 CPUs with RDPID or RDTSCP it
// reads the CPU number Linux keeps in TSC_AUX (what the vDSO's getcpu
// reads), about 20 ns, with no system call; elsewhere it calls getcpu(2)
// (0.2-0.4 us on the virtual machines we measured).
func GetCPU() int {
	if cpu, ok := fastCPU(); ok {
		return cpu
	}
	return getcpuSyscall()
}

// CheapCPU is GetCPU when it costs no system call (the RDPID/RDTSCP path);
// ok is false where only getcpu(2) would tell. For heuristics that are not
// worth a system call on a hot path.
func CheapCPU() (cpu int, ok bool) { return fastCPU() }

// getcpuSyscall is getcpu(2); 0 if it fails.
func getcpuSyscall() int {
	var cpu uint32
	_, _, e := syscall.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0)
	if e != 0 {
		return 0
	}
	return int(cpu)
}

// SetAffinity sets the CPU affinity of thread tid (0 = calling thread) to
// cpus. An empty list is rejected with unix.EINVAL. Mirrors
// sched_setaffinity(2) / set_cpus_allowed_ptr().
func SetAffinity(tid int, cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("sched_setaffinity(%d): empty CPU list: %w", tid, unix.EINVAL)
	}
	var set unix.CPUSet
	set.Zero()
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("sched_setaffinity(%d): CPU %d out of range: %w", tid, c, unix.EINVAL)
		}
		set.Set(c)
	}
	return wrap(fmt.Sprintf("sched_setaffinity(%d)", tid), unix.SchedSetaffinity(tid, &set))
}

// Affinity returns the CPUs thread tid (0 = calling thread) may run on, in
// increasing order.
func Affinity(tid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return nil, wrap(fmt.Sprintf("sched_getaffinity(%d)", tid), err)
	}
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Attr is a thread's scheduling policy, real-time priority (1..99, 0 for
// non-RT policies) and nice (-20..19, meaningful for SCHED_OTHER/BATCH).
type Attr struct {
	Policy   Policy
	Priority int
	Nice     int
}

// SetAttr sets thread tid's (0 = calling thread) policy, RT priority and nice
// with sched_setattr(2). SCHED_RESET_ON_FORK is set so that children of the
// thread do not inherit an RT policy. Returns an error wrapping ErrPermission
// on EPERM. Mirrors sched_setattr_nocheck() / sched_set_fifo_low().
func SetAttr(tid int, a Attr) error {
	return setAttr(tid, a, unix.SCHED_FLAG_RESET_ON_FORK)
}

// SetAttrInherited is SetAttr without SCHED_RESET_ON_FORK: the threads and
// processes the thread creates inherit its class. For a thread that starts
// children that must run in its class (the lab's raw probe). Clearing the
// flag of a thread that has it needs CAP_SYS_NICE.
func SetAttrInherited(tid int, a Attr) error { return setAttr(tid, a, 0) }

// setAttr is SetAttr and SetAttrInherited, with the sched_attr flags given.
func setAttr(tid int, a Attr, flags uint64) error {
	if a.Nice < -20 || a.Nice > 19 {
		return fmt.Errorf("sched_setattr(%d): nice %d out of range [-20, 19]: %w", tid, a.Nice, unix.EINVAL)
	}
	rt := a.Policy == PolicyFIFO || a.Policy == PolicyRR
	if rt && (a.Priority < 1 || a.Priority > 99) {
		return fmt.Errorf("sched_setattr(%d): RT priority %d out of range [1, 99]: %w", tid, a.Priority, unix.EINVAL)
	}
	if !rt && a.Priority != 0 {
		return fmt.Errorf("sched_setattr(%d): priority %d needs an RT policy: %w", tid, a.Priority, unix.EINVAL)
	}
	attr := unix.SchedAttr{
		Size:     unix.SizeofSchedAttr,
		Policy:   uint32(a.Policy),
		Flags:    flags,
		Nice:     int32(a.Nice),
		Priority: uint32(a.Priority),
	}
	return wrap(fmt.Sprintf("sched_setattr(%d, %s prio=%d nice=%d)", tid, a.Policy, a.Priority, a.Nice), unix.SchedSetAttr(tid, &attr, 0))
}

// setAttrNoResetOnFork is SetAttr without SCHED_RESET_ON_FORK, for giving a
// thread back the process's own attributes (ResetThread): the main thread
// does not have the flag, and a thread handed back to the Go runtime should
// not differ from it. Clearing the flag needs CAP_SYS_NICE; without it the
// flag is kept (harmless on SCHED_OTHER).
func setAttrNoResetOnFork(tid int, a Attr) error {
	if a.Policy == PolicyFIFO || a.Policy == PolicyRR || a.Nice < -20 || a.Nice > 19 {
		return SetAttr(tid, a)
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(a.Policy), Nice: int32(a.Nice)}
	if err := unix.SchedSetAttr(tid, &attr, 0); err == nil {
		return nil
	}
	return SetAttr(tid, a)
}

// GetAttr reads thread tid's (0 = calling thread) policy, RT priority and
// nice back from the kernel (sched_getattr(2)).
func GetAttr(tid int) (Attr, error) {
	sa, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return Attr{}, wrap(fmt.Sprintf("sched_getattr(%d)", tid), err)
	}
	return Attr{
		Policy:   Policy(sa.Policy &^ unix.SCHED_RESET_ON_FORK),
		Priority: int(sa.Priority),
		Nice:     int(sa.Nice),
	}, nil
}

// SetName sets the calling thread's name (PR_SET_NAME), truncated to the
// kernel's 15 bytes. The name shows in ps -eLf, top -H and /proc/<pid>/task.
func SetName(name string) error {
	if len(name) > 15 {
		name = name[:15]
	}
	b := make([]byte, 16)
	copy(b, name)
	return wrap("prctl(PR_SET_NAME)", unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&b[0])), 0, 0, 0))
}

// setThreadName sets thread tid's name through /proc/self/task/<tid>/comm.
func setThreadName(tid int, name string) error {
	if len(name) > 15 {
		name = name[:15]
	}
	return os.WriteFile("/proc/self/task/"+strconv.Itoa(tid)+"/comm", []byte(name), 0)
}

// ThreadName reads thread tid's name from /proc/self/task/<tid>/comm.
func ThreadName(tid int) (string, error) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/comm")
	if err != nil {
		return "", err
	}
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return string(b), nil
}

// ThreadCPUTime returns the CPU time thread tid of this process has
// consumed, in ns (clock_gettime on the thread's CPU clock, the same
// sum_exec_runtime the kernel's wq_worker_tick reads). Costs one system call.
func ThreadCPUTime(tid int) (int64, error) {
	// MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): (~tid << 3) | 4 | 2.
	clk := int32((^uint32(tid))<<3 | 6)
	var ts unix.Timespec
	if err := unix.ClockGettime(clk, &ts); err != nil {
		return 0, wrap(fmt.Sprintf("clock_gettime(thread %d)", tid), err)
	}
	return ts.Nano(), nil
}

// Mlockall locks the process's current and future memory (mlockall(2) with
// MCL_CURRENT|MCL_FUTURE), so that RT workers do not take page faults.
// Needs CAP_IPC_LOCK or a large RLIMIT_MEMLOCK; returns an error wrapping
// ErrPermission otherwise.
func Mlockall() error {
	return wrap("mlockall", unix.Mlockall(unix.MCL_CURRENT|unix.MCL_FUTURE))
}

// capSysNice is CAP_SYS_NICE's bit number.
const capSysNice = 23

var capOnce struct {
	sync.Once
	has bool
}

// HasCapSysNice reports whether the process holds CAP_SYS_NICE in its
// effective set (capget(2)). Root normally does.
func HasCapSysNice() bool {
	capOnce.Do(func() {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err == nil {
			capOnce.has = data[0].Effective&(1<<capSysNice) != 0
		}
	})
	return capOnce.has
}

// CheckRT reports whether threads of this process may switch to SCHED_FIFO
// at priority prio as far as privilege goes: nil when CAP_SYS_NICE is held
// or RLIMIT_RTPRIO >= prio, else an error wrapping ErrPermission whose
// text is DiagnoseClass's: the cause found and how to grant it. (A cgroup
// without an RT budget is not checked here; Probe or DiagnoseClass find
// it.)
func CheckRT(prio int) error {
	if HasCapSysNice() {
		return nil
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_RTPRIO, &rl); err == nil && rl.Cur >= uint64(prio) {
		return nil
	}
	return fmt.Errorf("SCHED_FIFO priority %d: %w: %s", prio, ErrPermission, privilegeText(Attr{Policy: PolicyFIFO, Priority: prio}))
}

// CheckNice reports whether threads of this process may lower their nice to
// nice: nil when CAP_SYS_NICE is held, nice >= 0, or RLIMIT_NICE allows it
// (the ceiling is 20 - rlim_cur), else an error wrapping ErrPermission
// whose text says the cause and how to grant it.
func CheckNice(nice int) error {
	if nice >= 0 || HasCapSysNice() {
		return nil
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rl); err == nil && 20-int64(rl.Cur) <= int64(nice) {
		return nil
	}
	return fmt.Errorf("nice %d: %w: %s", nice, ErrPermission, privilegeText(Attr{Policy: PolicyNormal, Nice: nice}))
}

// privilegeText is the diagnosis of a refused privilege check: the
// CAP_SYS_NICE or rlimit blocker DiagnoseClass finds, or a generic text
// if it finds none (the process changed meanwhile).
func privilegeText(a Attr) string {
	for _, b := range DiagnoseClass(a) {
		if b.Cause == CauseCap || b.Cause == CauseRTPrio || b.Cause == CauseNice {
			return b.String()
		}
	}
	return CauseCap + ": the process lacks CAP_SYS_NICE and its RLIMIT_RTPRIO/RLIMIT_NICE is too low for " + a.String() +
		"; fix: run as root, or `setcap cap_sys_nice+ep <binary>`, or raise the limit (`ulimit -r`/`ulimit -e`, /etc/security/limits.conf)"
}

// MonotonicNs returns CLOCK_MONOTONIC in ns (one system call), the clock
// the kernel's ftrace "local" clock and gowq's events are based on.
func MonotonicNs() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// SelfCPUTime returns the calling thread's consumed CPU time in ns
// (CLOCK_THREAD_CPUTIME_ID). One system call, about 0.1-0.3 us.
func SelfCPUTime() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}
