package wq

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
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

// Process-wide settings. atomic.
var (
	cpuIntensiveThresh atomic.Int64 // ns; 0 disables detection
	idleTimeout        atomic.Int64 // ns
	rtPriority         atomic.Int32 // 1..99
	highPriFIFO        atomic.Bool  // HighPri class runs SCHED_FIFO instead of nice -20
	powerEfficient     atomic.Bool
	dfltScope          atomic.Int32
	cmTick             atomic.Int64 // ns between CM monitor samples
)

func init() {
	cpuIntensiveThresh.Store(int64(10 * time.Millisecond))
	idleTimeout.Store(int64(300 * time.Second))
	rtPriority.Store(1)
	dfltScope.Store(int32(topology.ScopeCacheShard))
	cmTick.Store(int64(time.Millisecond))
}

// SetCPUIntensiveThresh sets how long (CPU time) an item on a per-CPU
// queue may run without sleeping before it is marked CPU-intensive and
// stops holding back its pool; 0 disables the detection. Default 10 ms.
// Mirrors the workqueue.cpu_intensive_thresh_us parameter. Negative values
// return ErrInvalidArgument.
func SetCPUIntensiveThresh(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: cpu_intensive_thresh %v", ErrInvalidArgument, d)
	}
	cpuIntensiveThresh.Store(int64(d))
	return nil
}

// CPUIntensiveThresh returns the current threshold.
func CPUIntensiveThresh() time.Duration { return time.Duration(cpuIntensiveThresh.Load()) }

// SetIdleTimeout sets how long a surplus idle worker lives before it is
// reaped (default 300 s; at least two idle workers per pool stay). d must
// be positive, else ErrInvalidArgument. Mirrors IDLE_WORKER_TIMEOUT.
func SetIdleTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: idle timeout %v", ErrInvalidArgument, d)
	}
	idleTimeout.Store(int64(d))
	return nil
}

// SetRTPriority sets the SCHED_FIFO priority (1..99) of the RT class for
// queues created, or switched with SetPolicy, from now on; default 1, as
// sched_set_fifo_low(). Mirrors the proposed kworker_rt_prio. Out of
// range: ErrInvalidArgument. A priority that a new thread of this process
// may not use (tried on a short-lived thread: no CAP_SYS_NICE and
// RLIMIT_RTPRIO below it, or a cgroup without an RT budget) returns
// ErrPermission and changes nothing; writing the current value always
// succeeds. Blocks for one thread creation.
func SetRTPriority(prio int) error {
	if prio < 1 || prio > 99 {
		return fmt.Errorf("%w: RT priority %d (range 1..99)", ErrInvalidArgument, prio)
	}
	attrMu.Lock()
	defer attrMu.Unlock()
	if prio == RTPriority() {
		return nil // changes nothing
	}
	if err := probeWorker(nil, probeAttr(classAttrs{policy: sched.PolicyFIFO, prio: prio})); err != nil {
		return fmt.Errorf("RT priority %d: %w", prio, err)
	}
	rtPriority.Store(int32(prio))
	return nil
}

// RTPriority returns the SCHED_FIFO priority of RT workers.
func RTPriority() int { return int(rtPriority.Load()) }

// SetHighPriPolicy selects what the HighPri class
// means for queues created from now on, PolicyHighPri (nice -20, the
// default) or PolicyFIFO (SCHED_FIFO at the RT priority). Other values
// return ErrInvalidArgument. Switching to PolicyFIFO when a new thread of
// this process may not use SCHED_FIFO at the RT priority (tried on a
// short-lived thread, which the call blocks for) returns ErrPermission and
// changes nothing.
func SetHighPriPolicy(p Policy) error {
	if p != PolicyHighPri && p != PolicyFIFO {
		return fmt.Errorf("%w: HighPri policy must be highpri or fifo, not %v", ErrInvalidArgument, p)
	}
	attrMu.Lock()
	defer attrMu.Unlock()
	if p == PolicyHighPri || highPriFIFO.Load() {
		// The default, which Alloc checks itself, or no change.
		highPriFIFO.Store(p == PolicyFIFO)
		return nil
	}
	prio := RTPriority()
	if err := probeWorker(nil, probeAttr(classAttrs{policy: sched.PolicyFIFO, prio: prio})); err != nil {
		return fmt.Errorf("HighPri policy fifo (priority %d): %w", prio, err)
	}
	highPriFIFO.Store(true)
	return nil
}

// HighPriPolicy returns the current HighPri switch setting.
func HighPriPolicy() Policy {
	if highPriFIFO.Load() {
		return PolicyFIFO
	}
	return PolicyHighPri
}

// SetPowerEfficient sets the power_efficient global: when on, queues
// allocated with PowerEfficient (and not PerCPU) become unbound.
func SetPowerEfficient(on bool) { powerEfficient.Store(on) }

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

// SetDefaultAffinityScope sets the scope of unbound queues created from
// now on, and of the live ones that follow the default ("default" in
// their affinity_scope) when their pools are next rebuilt
// (workqueue.default_affinity_scope). An unknown scope returns
// ErrInvalidArgument; so does a scope whose pods the workers of a live
// strict queue that follows the default could not be pinned to (probed
// as by SetAffinityScope). Nothing changes then.
func SetDefaultAffinityScope(s Scope) error {
	if _, err := topology.ParseScope(s.String()); err != nil || s == topology.ScopeDefault {
		return fmt.Errorf("%w: default affinity scope %v", ErrInvalidArgument, s)
	}
	attrMu.Lock()
	defer attrMu.Unlock()
	if s == defaultScope() {
		return nil
	}
	if err := checkQueues(liveQueues(), currentTopology(), unboundMask.Load(), &s); err != nil {
		return fmt.Errorf("default affinity scope %v: %w", s, err)
	}
	dfltScope.Store(int32(s))
	return nil
}

func defaultScope() Scope { return Scope(dfltScope.Load()) }

// classFor returns the scheduling attributes of policy p now.
func classFor(p Policy) classAttrs {
	prio := int(rtPriority.Load())
	switch p {
	case PolicyFIFO:
		return classAttrs{policy: sched.PolicyFIFO, prio: prio}
	case PolicyHighPri:
		if highPriFIFO.Load() {
			return classAttrs{policy: sched.PolicyFIFO, prio: prio}
		}
		return classAttrs{policy: sched.PolicyNormal, nice: -20}
	}
	return classAttrs{policy: sched.PolicyNormal}
}

// resolveClass checks that the process may use policy p: statically
// (capabilities and rlimits), then, for a class other than the normal one,
// on a short-lived thread (the kernel may still refuse, e.g. SCHED_FIFO in
// a cgroup without an RT budget). With fallback, an RT class not
// permitted becomes HighPri, and a nice -20 not permitted becomes normal
// (fellBack = true) and reason is why (the first blocker DiagnoseRefusal
// finds for the class asked); without, the error wraps ErrPermission and
// says the cause and the fix.
func resolveClass(p Policy, fallback bool) (classAttrs, bool, string, error) {
	c, fell, err := resolveClassProbe(p, fallback, true)
	if !fell {
		return c, false, "", err
	}
	// Why: the first blocker of the class asked for (error path only).
	asked := classFor(p)
	a := sched.Attr{Policy: asked.policy, Priority: asked.prio, Nice: asked.nice}
	reason := sched.DiagnoseRefusal(a)[0].String()
	if asked.rt() && !c.rt() && c.nice == 0 {
		// RT fell past HighPri to normal: name the second refusal too, or
		// the reader wonders why the queue did not get nice -20.
		hp := sched.Attr{Policy: sched.PolicyNormal, Nice: -20}
		reason += "; HighPri (nice -20) refused too: " + sched.DiagnoseRefusal(hp)[0].String()
	}
	return c, true, reason, nil
}

// resolveClassProbe is resolveClass; probe false skips the thread probe
// (SetPolicy probes the exact workers itself). A probe that cannot run
// because the process is at a thread limit leaves the static answer.
func resolveClassProbe(p Policy, fallback, probe bool) (classAttrs, bool, error) {
	c := classFor(p)
	check := func(c classAttrs) error {
		var err error
		if c.rt() {
			err = sched.CheckRT(c.prio)
		} else {
			err = sched.CheckNice(c.nice)
		}
		if err != nil || !probe || probeAttr(c) == nil {
			return err
		}
		if err := probeWorker(nil, probeAttr(c)); err != nil && !errors.Is(err, ErrThreadLimit) {
			return err
		}
		return nil
	}
	err := check(c)
	if err == nil {
		return c, false, nil
	}
	if !fallback {
		if errors.Is(err, ErrPermission) {
			return c, false, err
		}
		return c, false, fmt.Errorf("%w: %w", ErrPermission, err)
	}
	if c.rt() {
		c = classAttrs{policy: sched.PolicyNormal, nice: -20}
		if check(c) == nil {
			return c, true, nil
		}
	}
	return classAttrs{policy: sched.PolicyNormal}, true, nil
}
