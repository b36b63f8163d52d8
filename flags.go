package wq

import (
	"fmt"
	"strings"

	"github.com/gowq/wq/internal/topology"
)

// Flags select a workqueue's pool type, worker class and behaviour. They
// mirror the kernel's WQ_* flags given to alloc_workqueue().
type Flags uint32

const (
	// PerCPU binds work items to the CPU they are queued on (WQ_PERCPU, the
	// default when neither PerCPU nor Unbound is given). max_active limits
	// in-flight items per CPU; pools are concurrency-managed.
	PerCPU Flags = 1 << iota
	// Unbound serves items from pools not bound to one CPU but to an
	// affinity pod (WQ_UNBOUND). max_active is system-wide, split per NUMA
	// node. Thread-backed unbound pools are concurrency-managed at the
	// number of CPUs their workers may use, lifted while items block;
	// goroutine-backed ones are not (see the package doc).
	Unbound
	// HighPri uses the high-priority worker class, nice -20 by default
	// (WQ_HIGHPRI). The class's policy can be switched process-wide, see
	// SetHighPriPolicy.
	HighPri
	// CPUIntensive items do not take part in concurrency management
	// (WQ_CPU_INTENSIVE): a running item never holds back the next one.
	CPUIntensive
	// Freezable queues stop starting items while the freezer is on
	// (WQ_FREEZABLE); see FreezeAll.
	Freezable
	// MemReclaim gives the queue a rescuer thread, created by Alloc, that
	// guarantees forward progress when no new worker can be created
	// (WQ_MEM_RECLAIM).
	MemReclaim
	// PowerEfficient makes a per-CPU queue unbound when the power_efficient
	// global is on (WQ_POWER_EFFICIENT).
	PowerEfficient
	// Sysfs makes the queue's attributes visible and writable through the
	// runtime attribute registry (WQ_SYSFS).
	Sysfs
	// RT uses the real-time worker class: SCHED_FIFO at the lowest RT
	// priority (1 by default, see SetRTPriority), as proposed with
	// WQ_SCHED_FIFO / WQ_RT. RT|PerCPU gets a third standard pool per CPU
	// (worker names end in "F"); RT|Unbound gets the "cpu" affinity scope
	// with strict affinity. RT|HighPri is rejected with ErrInvalidFlags.
	// Each RT pool reserves one P (GOMAXPROCS + 1) while it lives, and the
	// items of default (goroutine-backed) queues leave it free, within the
	// bounds doc.go states ("Wake path"); the program's own goroutines
	// are not held back, and while they keep every P busy a woken RT
	// worker waits for a P (Stats().PWait).
	RT

	flagOrdered // __WQ_ORDERED, set by AllocOrdered only
)

var flagNames = []struct {
	f Flags
	n string
}{
	{PerCPU, "PERCPU"}, {Unbound, "UNBOUND"}, {HighPri, "HIGHPRI"},
	{CPUIntensive, "CPU_INTENSIVE"}, {Freezable, "FREEZABLE"},
	{MemReclaim, "MEM_RECLAIM"}, {PowerEfficient, "POWER_EFFICIENT"},
	{Sysfs, "SYSFS"}, {RT, "RT"}, {flagOrdered, "ORDERED"},
}

// String returns the flags as the kernel names them, joined by "|", e.g.
// "UNBOUND|HIGHPRI"; "0" for none.
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var parts []string
	for _, fn := range flagNames {
		if f&fn.f != 0 {
			parts = append(parts, fn.n)
			f &^= fn.f
		}
	}
	if f != 0 {
		parts = append(parts, "0x"+strings.ToLower(hex(uint64(f))))
	}
	return strings.Join(parts, "|")
}

func hex(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var b [16]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b[i:])
}

// BusyFlags is what Busy reports: a combination of BusyPending and
// BusyRunning (the kernel's WORK_BUSY_* bits from work_busy()).
type BusyFlags uint8

const (
	BusyPending BusyFlags = 1 << iota // WORK_BUSY_PENDING: queued or timer armed
	BusyRunning                       // WORK_BUSY_RUNNING: a worker executes it
)

// Policy is the worker class of a workqueue, its runtime attribute
// "policy".
type Policy int

const (
	// PolicyNormal: SCHED_OTHER at nice 0, the kernel's normal pools.
	PolicyNormal Policy = iota
	// PolicyHighPri: the high-priority class; nice -20, or SCHED_FIFO-low
	// when SetHighPriPolicy(PolicyFIFO) was called.
	PolicyHighPri
	// PolicyFIFO: SCHED_FIFO at the RT priority (SetRTPriority, 1 by
	// default), the RT class.
	PolicyFIFO
)

// String returns "normal", "highpri" or "fifo".
func (p Policy) String() string {
	switch p {
	case PolicyNormal:
		return "normal"
	case PolicyHighPri:
		return "highpri"
	case PolicyFIFO:
		return "fifo"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// parsePolicy parses "normal", "highpri" or "fifo" (the "policy" and
// "highpri_policy" attributes); ErrInvalidArgument otherwise.
func parsePolicy(s string) (Policy, error) {
	switch strings.TrimSpace(s) {
	case "normal":
		return PolicyNormal, nil
	case "highpri":
		return PolicyHighPri, nil
	case "fifo":
		return PolicyFIFO, nil
	}
	return 0, fmt.Errorf("%w: policy %q (want normal, highpri or fifo)", ErrInvalidArgument, s)
}

// Scope is an affinity scope of unbound queues: "cpu", "smt",
// "cache_shard" (default), "cache", "numa" or "system".
type Scope = topology.Scope

// Affinity scopes. ScopeDefault, the zero value, follows the default
// affinity scope (SetDefaultAffinityScope): "default" in affinity_scope.
const (
	ScopeDefault = topology.ScopeDefault
	ScopeCPU     = topology.ScopeCPU
	ScopeSMT     = topology.ScopeSMT
	// ScopeCacheShard: each last-level cache split into pods of about
	// CacheShardSize cores with their SMT siblings (the default).
	ScopeCacheShard = topology.ScopeCacheShard
	ScopeCache      = topology.ScopeCache
	ScopeNUMA       = topology.ScopeNUMA
	ScopeSystem     = topology.ScopeSystem
)
