package sched

// Blocker is one reason why this process cannot use a scheduling class,
// found by DiagnoseClass: Cause is a short, stable name ("CAP_SYS_NICE",
// "RLIMIT_RTPRIO", "RLIMIT_NICE", "cgroup cpu.rt_runtime_us",
// "sched_rt_runtime_us", "seccomp"), Detail the value found (with the
// cgroup path where one is involved), Fix the exact remedy.
type Blocker struct {
	Cause  string
	Detail string
	Fix    string
}

// DiagnoseClass returns what stands between this process and class a
// (SCHED_FIFO/RR at a priority, or SCHED_OTHER at a negative nice): every
// blocker found, most likely first; none when the class can be used as
// far as can be told without trying. It reads capabilities, rlimits, the
// process's cpu cgroup and /proc; it makes no thread. (Filled in by the
// RT-in-production work.)
func DiagnoseClass(a Attr) []Blocker { return nil }
