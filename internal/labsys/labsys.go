// Package labsys holds the thread and measurement tools that the lab
// (github.com/gowq/wq/lab, cmd/wqlab) and gowq's own tests need to drive
// workqueues the way a latency-critical program would, from a thread of
// their own with a chosen CPU and class, to hand a token between threads
// with the futex the workers themselves park on, and to switch gowq's
// measurement of itself. They wrap the same code the workers use
// (internal/sched, internal/measure), so a measurement goes through the
// library's own thread and wake primitives, and only internal/sched
// makes the system calls.
//
// It is internal: a program that uses gowq does not need it, and Go's
// internal rule lets only packages under github.com/gowq/wq import it.
// The lab uses package wq's public API everywhere else. Errors that
// concern privileges and thread limits match wq.ErrPermission and
// wq.ErrThreadLimit, as the library's own do.
package labsys

import (
	"errors"
	"fmt"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/measure"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// ThreadAttr is a scheduling class: a policy (ThreadNormal with a nice
// value, or ThreadFIFO with an RT priority 1..99). It is comparable.
type ThreadAttr = sched.Attr

// The policies of ThreadAttr.
const (
	ThreadNormal = sched.PolicyNormal // SCHED_OTHER (SCHED_NORMAL), at ThreadAttr.Nice
	ThreadFIFO   = sched.PolicyFIFO   // SCHED_FIFO, at ThreadAttr.Priority
)

// ClassBlocker is one thing that keeps this process from a scheduling
// class (DiagnoseClass): its Cause (a capability, an rlimit, a cgroup's
// RT budget, sched_rt_runtime_us, seccomp), the Detail found and the Fix.
// It is comparable; String gives "Cause: Detail; fix: Fix".
type ClassBlocker = sched.Blocker

// CPUSet is a set of CPU ids, as the kernel's struct cpumask. The zero
// value is the empty set; the set operations (And, Or, ...) return new
// sets, so a CPUSet is safe to copy and to share between goroutines.
type CPUSet = topology.CPUSet

// NewCPUSet returns the set of the given CPU ids; ids outside the range a
// CPU id can have are ignored.
func NewCPUSet(cpus ...int) CPUSet { return topology.NewCPUSet(cpus...) }

// ParseCPUList parses a CPU list as Linux prints it ("0-3,8,10-11", and
// the stride form "0-7:1/2"); the empty string is the empty set. It
// returns an error for a malformed list or an id beyond the largest CPU
// id the library handles.
func ParseCPUList(list string) (CPUSet, error) { return topology.ParseList(list) }

// ParseScope returns the affinity scope named name as wq.Scope's String and
// the sysfs attribute affinity_scope spell it ("cpu", "smt", "cache",
// "cache_shard", "numa", "system", "default"); case and surrounding white
// space are ignored. Any other name is an error that names it.
func ParseScope(name string) (wq.Scope, error) { return topology.ParseScope(name) }

// GoThread runs fn on a new goroutine locked to an OS thread of its own,
// never the process's main thread, as the library starts its workers. The
// thread is destroyed when fn returns (it never goes back to the Go
// runtime), so the affinity and class fn sets on it with
// SetThreadAffinity and SetThreadAttr never reach another goroutine. It
// goes through the library's thread gate: near a thread limit it starts
// nothing and returns an error wrapping wq.ErrThreadLimit (the Go runtime
// would abort the process); otherwise nil. It blocks only for the
// limits' reading (about 20 us). Mirrors kthread_run's dedicated thread.
func GoThread(fn func()) error {
	if err := sched.GoLocked(fn); err != nil {
		if errors.Is(err, sched.ErrThreadLimit) {
			return fmt.Errorf("%w: %w", wq.ErrThreadLimit, err)
		}
		return err
	}
	return nil
}

// SetThreadAffinity pins the calling thread to cpus
// (sched_setaffinity(2) on the thread). Call it only on a thread started
// by GoThread, whose changed attributes die with it. An empty list is an
// error; so is a list with no online CPU the process may use.
func SetThreadAffinity(cpus []int) error { return sched.SetAffinity(0, cpus) }

// ThreadAffinity returns the CPUs the calling thread may run on
// (sched_getaffinity(2)), in increasing order: the process's mask unless
// the thread was pinned.
func ThreadAffinity() ([]int, error) { return sched.Affinity(0) }

// SetThreadAttr sets the calling thread's class a (sched_setattr(2),
// with SCHED_RESET_ON_FORK so that its children do not inherit an RT
// policy). Call it only on a thread started by GoThread. It returns an
// error wrapping wq.ErrPermission when the process lacks the privilege (see
// DiagnoseClass), and an error for a nice outside -20..19. Mirrors
// sched_set_fifo_low() / set_user_nice().
func SetThreadAttr(a ThreadAttr) error { return permitted(sched.SetAttr(0, a)) }

// SetThreadAttrInherited is SetThreadAttr without SCHED_RESET_ON_FORK:
// the threads and processes the calling thread creates inherit class a
// (the raw probe's C threads, started from a FIFO queuer). Call it only on
// a thread started by GoThread, and give the thread its SetThreadAttr back
// when its children are started. Errors as SetThreadAttr's.
func SetThreadAttrInherited(a ThreadAttr) error {
	return permitted(sched.SetAttrInherited(0, a))
}

// CheckRT reports whether this process may run threads at SCHED_FIFO
// priority prio, as far as privilege goes: nil with CAP_SYS_NICE or
// RLIMIT_RTPRIO >= prio, else an error wrapping wq.ErrPermission that names
// the cause and how to grant it. It makes no thread and changes nothing;
// a cgroup without an RT budget is found by DiagnoseClass, not here.
func CheckRT(prio int) error { return permitted(sched.CheckRT(prio)) }

// CheckNice reports whether this process may lower a thread's nice to
// nice: nil with CAP_SYS_NICE, for nice >= 0, or when RLIMIT_NICE allows
// it; else an error wrapping wq.ErrPermission that names the cause and how
// to grant it. It changes nothing.
func CheckNice(nice int) error { return permitted(sched.CheckNice(nice)) }

// HasCapSysNice reports whether the process holds CAP_SYS_NICE in its
// effective capability set (capget(2)); root normally does.
func HasCapSysNice() bool { return sched.HasCapSysNice() }

// DiagnoseClass returns what stands between this process and class a:
// every blocker found (capabilities, rlimits, seccomp, the cpu cgroup's
// RT budget and its ancestors', kernel.sched_rt_runtime_us), most likely
// first; none when the class can be used as far as can be told without
// trying. It makes no thread, blocks for a few small file reads under
// /proc and /sys, and is safe from any goroutine. Files that cannot be
// read count as imposing nothing.
func DiagnoseClass(a ThreadAttr) []ClassBlocker { return sched.DiagnoseClass(a) }

// CurrentCPU returns the CPU the calling thread runs on at this instant
// (0 if it cannot tell); stale as soon as it returns unless the thread is
// pinned. About 20 ns where the CPU has RDPID or RDTSCP (no system
// call), else getcpu(2). Mirrors raw_smp_processor_id(), as wq.Workqueue.QueueOn's
// choice of CPU for Queue does.
func CurrentCPU() int { return sched.GetCPU() }

// SleepThread blocks the calling thread for d with
// clock_nanosleep(CLOCK_MONOTONIC), restarting after a signal until d is
// up. Unlike time.Sleep no Go timer and no other thread's wake-up stand
// on the way back, so a short pause ends within microseconds of its
// deadline on a pinned or SCHED_FIFO thread. d <= 0 returns at once.
func SleepThread(d time.Duration) { sched.Nanosleep(int64(d)) }

// MonotonicNow returns CLOCK_MONOTONIC in ns, read through the vDSO (no
// system call): the clock of Stages' timestamps. Never blocks.
func MonotonicNow() int64 { return sched.Nanotime() }

// ThreadCPUTime returns the CPU time thread tid of this process has
// consumed (its thread CPU clock, the sum_exec_runtime the kernel's
// wq_worker_tick reads), in ns resolution. One system call; an error
// when tid is not a thread of this process.
func ThreadCPUTime(tid int) (time.Duration, error) {
	ns, err := sched.ThreadCPUTime(tid)
	return time.Duration(ns), err
}

// Parker hands a token from any goroutine to one thread through a futex,
// the primitive a worker parks on between items: Unpark makes the next
// Park return (at once if it came first), as a binary semaphore. Park
// blocks the calling thread in futex_wait, not the Go scheduler, so a
// thread woken by Unpark runs as soon as the kernel runs it. Park must be
// called by one thread at a time; Unpark is safe from any goroutine. The
// zero value is ready to use; a Parker must not be copied after first
// use.
type Parker struct{ p sched.Parker }

// Park blocks the calling thread in futex_wait until Unpark is called,
// or returns at once when an Unpark came since the last Park; it
// consumes that token. As a worker does when it parks, it hands the
// thread's P back to the runtime first when goroutines may be runnable on
// it (a goroutine-backed worker the caller just woke sits in its P's
// runnext): they then run at once on another thread instead of waiting
// for sysmon to retake the P (20 us to 10 ms). Otherwise the thread keeps
// its P in the system-call state, and the runtime gives it to other
// goroutines only when sysmon retakes it.
func (p *Parker) Park() {
	if sched.RunnableBehind() {
		p.p.ParkHandOff()
		return
	}
	p.p.Park()
}

// Unpark wakes the thread in Park, or lets the next Park return at once.
// It never blocks.
func (p *Parker) Unpark() { p.p.Unpark() }

// permittedError is an error of internal/sched that also matches
// ErrPermission, with the same text: the causes and remedies it names
// are the message.
type permittedError struct{ err error }

func (e permittedError) Error() string        { return e.err.Error() }
func (e permittedError) Unwrap() error        { return e.err }
func (e permittedError) Is(target error) bool { return target == wq.ErrPermission }

// permitted makes an EPERM of internal/sched match wq.ErrPermission too.
func permitted(err error) error {
	if err != nil && errors.Is(err, sched.ErrPermission) {
		return permittedError{err}
	}
	return err
}

// Mlockall locks the process's current and future memory into RAM
// (mlockall(MCL_CURRENT|MCL_FUTURE)), so that RT threads never wait for a
// page fault. wqlab calls it once at start-up for its RT rows. It needs
// CAP_IPC_LOCK (root) or a large enough RLIMIT_MEMLOCK; otherwise it
// returns an error wrapping wq.ErrPermission and changes nothing. The Go
// heap grows with locked pages from then on, so memory use counts against
// the limit. A program calls unix.Mlockall (golang.org/x/sys/unix)
// itself; docs/deploy.md says when.
func Mlockall() error {
	if err := sched.Mlockall(); err != nil {
		if errors.Is(err, sched.ErrPermission) {
			return fmt.Errorf("%w: %v (needs CAP_IPC_LOCK or RLIMIT_MEMLOCK; `ulimit -l unlimited`)", wq.ErrPermission, err)
		}
		return err
	}
	return nil
}

// Stages are the timestamps of one work item's way from Queue to its work
// function, as recorded by SetStageRecorder; Stages.Work is the item's
// *wq.Work. See measure.Stages for each stage.
type Stages = measure.Stages

// SetStageRecorder sets fn to receive the stage timestamps (Stages) of
// every work item started by a pool worker from now on; nil stops the
// recording. fn is called on the worker's thread just before the work
// function, with the worker's pool lock not held; it must not block: the
// item, every item behind it on that worker's pool (of any queue sharing
// the pool), and a Destroy waiting for them, wait for it; and waiting in
// fn for work of that pool deadlocks (s.Work's Flush, a Flush of its
// queue: the item has not started yet, so no ErrDeadlock is detected). It
// must not keep the pointer, which the worker reuses for its next item:
// copy what it needs. A panic in fn is recovered and logged; a
// runtime.Goexit replaces the worker and leaves the item pending for the
// next one. Items run by a rescuer or an escaper report 0 for the
// wake-up's stages.
//
// Cost: with no recorder, one atomic load at each stage point (Queue, the
// wake-up, the worker's park, the item start) and no system call. With a
// recorder, a few vDSO clock reads (about 20 ns each) per item, one raw
// clock_gettime system call (0.1-0.5 us) per worker wake-up, and fn.
// Safe from any goroutine; items in flight when the recorder changes may
// report 0 for stages stamped before the change. For worst-case
// attribution (wqlab wake --explain); the kernel's counterpart is the
// workqueue tracepoints plus sched_wakeup/sched_switch.
func SetStageRecorder(fn func(*Stages)) { measure.SetRecorder(fn) }

// SetPWaitAccounting turns the P-wait figure (wq.QueueStats.PWait) on or
// off (on by default). When on, each wake-up of a thread worker costs
// two counter reads (where the time-stamp counter is the kernel's
// clocksource; elsewhere a clock_gettime system call, 0.1-0.5 us;
// `wqlab wake --no-pwait` and BenchmarkPWaitRoundTrip measure it) and the
// wait is added to PWait of the queue whose item the worker runs first.
// When off, PWait stops growing. Safe from any goroutine.
func SetPWaitAccounting(on bool) { measure.PWait.Store(on) }

// SetCPUAccounting turns the CPU time accounting (wq.QueueStats.CPUTime)
// on or off (on by default). When on, a thread worker reads its thread's
// CPU clock (one clock_gettime system call, about 0.3 us) after each item
// that ran at least 50 us of wall time, before an item of another queue
// (pwq) than the items run since the last read, and after an item or
// before it parks when 1 ms of wall time has passed since the last read;
// each read charges the CPU used since the previous one to the queue of
// the items run since. So a worker makes no system call per short item,
// awake or parking between items; CPUTime counts every nanosecond the
// workers spent in items and in their own loop, and lags by at most the
// CPU of 1 ms of wall time per worker; a worker whose goroutine a work
// function moved off its thread (runtime.UnlockOSThread) is retired
// without charging what it owed, since its thread's clock is no longer
// the caller's. When off, CPUTime stays 0; CPU used while it is off is
// charged to no queue after it is turned on again (the first item to end
// after a switch is charged at most its wall time). Safe from any
// goroutine.
func SetCPUAccounting(on bool) { measure.CPUAccounting.Store(on) }
