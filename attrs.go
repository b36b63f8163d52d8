package wq

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// Typed attribute setters. Each changes one field of the queue's Attrs
// and goes through the one apply path (applyAttrs, attrs_apply.go), so it
// validates, probes and installs exactly as ApplyAttrs and SetAttr do. A
// setter of an attribute that q fixes returns ErrReadOnly whatever the
// value, as a write to a read-only sysfs file fails. Invalid values return
// an error wrapping ErrInvalidArgument and change nothing.

// rt reports whether q is an RT queue (flags are immutable after Alloc).
func (q *Workqueue) rt() bool { return q.flags&RT != 0 }

// SetPolicy switches q's worker class (the "policy" attribute, a gowq
// extension of the kernel's sysfs attributes): PolicyNormal, PolicyHighPri or PolicyFIFO. Not allowed on RT
// queues (ErrReadOnly). Switching an unbound queue to PolicyNormal from
// another class also sets nice 0; the policy the queue already has
// changes nothing. Before it is accepted, the class is applied, with
// the CPU affinity of each pool the queue would use, on a short-lived
// thread, as a new worker would get it: a class the process may not use
// (no CAP_SYS_NICE or rlimit, or a cgroup without an RT budget) returns
// ErrPermission, CPUs it may not use ErrInvalidArgument, and a process
// with no thread to spare for the probe ErrThreadLimit; nothing changes
// then. Blocks for one thread creation per distinct worker CPU set (tens
// of us each). Safe from any goroutine.
func (q *Workqueue) SetPolicy(p Policy) error {
	return q.applyAttrs("policy", func(a *Attrs) error {
		if q.rt() {
			return ErrReadOnly
		}
		if p == PolicyNormal && a.Policy != PolicyNormal {
			a.Nice = 0 // leaving another class: the normal class's nice
		}
		a.Policy = p
		return nil
	})
}

// SetNice sets the nice (-20..19) of an unbound queue's workers; the class
// becomes SCHED_OTHER at that nice ("normal" policy unless -20). ErrReadOnly
// on RT and per-CPU queues. A nice that a new thread of this process cannot
// get returns ErrPermission and changes nothing: a negative nice without
// CAP_SYS_NICE or RLIMIT_NICE, and, in a process started at a positive
// nice (nice -n 19), any nice below the one its threads start with (a
// thread may raise its nice, not lower it again). Nice 0 is the exception:
// it is the normal class's value, and where a worker cannot get it the
// worker keeps the nice it inherits, as every normal-class worker does.
// Mirrors writing the sysfs nice attribute. Blocks for the probe threads
// (see SetPolicy).
func (q *Workqueue) SetNice(nice int) error {
	return q.applyAttrs("nice", func(a *Attrs) error {
		if !q.unbound || q.rt() {
			return ErrReadOnly
		}
		a.Policy, a.Nice = PolicyNormal, nice
		return nil
	})
}

// SetCPUMask sets an unbound queue's own cpumask to cpus (the cpumask
// attribute); CPUs that are not online are kept in the mask but unused.
// The workers use the CPUs of the mask that are also in the global unbound
// cpumask, or the global mask alone when none is (see SetUnboundCPUMask).
// ErrReadOnly on per-CPU queues. An
// empty list, one with no online CPU, or one whose CPUs a thread of this
// process may not run on (outside its cpuset: sched_setaffinity says
// EINVAL) returns ErrInvalidArgument and changes nothing. "Online" is
// gowq's view: the kernel's online CPUs within the process's affinity and
// cpuset (see OnlineCPUs). Blocks for the probe threads (see SetPolicy).
func (q *Workqueue) SetCPUMask(cpus []int) error {
	return q.applyAttrs("cpumask", func(a *Attrs) error {
		if !q.unbound {
			return ErrReadOnly
		}
		if len(cpus) == 0 {
			return fmt.Errorf("%w: empty cpumask", ErrInvalidArgument)
		}
		a.CPUs = slices.Clone(cpus)
		return nil
	})
}

// SetAffinityScope sets an unbound queue's affinity scope; ScopeDefault
// makes the queue follow the default scope ("default" in affinity_scope),
// and a value that is not a scope returns ErrInvalidArgument. ErrReadOnly
// on per-CPU queues, RT queues (they are fixed to the cpu scope) and
// ordered queues. With
// strict affinity each pod's CPU list is tried on a probe thread first;
// one a thread may not be pinned to returns ErrInvalidArgument and changes
// nothing.
func (q *Workqueue) SetAffinityScope(s Scope) error {
	return q.applyAttrs("affinity_scope", func(a *Attrs) error {
		if !q.unbound || q.rt() || q.ordered {
			return ErrReadOnly
		}
		a.Scope = s
		return nil
	})
}

// SetAffinityStrict sets whether an unbound queue's workers stay inside
// their pod (strict) or may leave it after starting an item. ErrReadOnly on
// RT queues (always strict). Validated like SetAffinityScope.
func (q *Workqueue) SetAffinityStrict(strict bool) error {
	return q.applyAttrs("affinity_strict", func(a *Attrs) error {
		if !q.unbound || q.rt() {
			return ErrReadOnly
		}
		a.Strict = strict
		return nil
	})
}

// Globals.

var unboundMask atomic.Pointer[topology.CPUSet]

// checkQueues validates the live unbound queues qs for the global unbound
// mask g and, when scope is not nil, the default affinity scope *scope
// (for the queues that follow it). Called with attrMu held for writing.
func checkQueues(qs []*Workqueue, topo *topology.Topology, g *topology.CPUSet, scope *Scope) error {
	memo := probeMemo{}
	for _, q := range qs {
		if !q.unbound || q.life.load().destroyed() {
			continue
		}
		q.mu.Lock()
		a := q.attrs
		q.mu.Unlock()
		if scope != nil {
			if !a.scopeDefault {
				continue
			}
			a.scope = *scope
		}
		if err := q.applicable(a, topo, g, memo); err != nil {
			return fmt.Errorf("workqueue %s: %w", q.name, err)
		}
	}
	return nil
}

// Attribute validation.
//
// Every attribute write is checked against what this process can actually
// do before it is accepted: the workers of the pools that the new
// attributes select (the pool keys installTable builds) must be creatable.
// Static checks (capabilities, rlimits, the online mask) miss cases where
// the kernel still refuses, and a refused worker creation leaves the
// queue's items stranded: an unprivileged process started at nice 19 may
// not lower a new thread's nice to 14, a cgroup without an RT budget
// refuses SCHED_FIFO even to root, and CPUs outside the cpuset refuse
// sched_setaffinity. So each distinct (CPU list, class) pair a worker would
// get is tried on a short-lived thread (sched.Probe applies both, in the
// order worker.setup does), and the first refusal is returned: wrapping
// ErrPermission for the class, ErrInvalidArgument for the CPUs, and
// ErrThreadLimit when the process has no thread to spare for the probe.
// Each probe costs one thread creation (tens of us); writes are rare.

// attrMu orders attribute writes: per-queue writes hold it for reading,
// process-wide writes (which validate every queue) for writing, so that a
// validated combination of queue and global attributes is the one
// installed. Lock order: attrMu before Workqueue.mu.
var attrMu sync.RWMutex

// equal reports whether a and b select the same pools.
func (a queueAttrs) equal(b queueAttrs) bool {
	return a.class == b.class && a.policy == b.policy && a.cpus.Equal(b.cpus) &&
		a.scope == b.scope && a.strict == b.strict && a.scopeDefault == b.scopeDefault
}

// probeMemo remembers probe results within one validation.
type probeMemo map[string]error

// applicable reports whether workers of q's pools with attributes a (on
// topo, with global unbound mask g) can be created. Called with q.mu held
// or with a copy of q's attributes.
func (q *Workqueue) applicable(a queueAttrs, topo *topology.Topology, g *topology.CPUSet, memo probeMemo) error {
	if memo == nil {
		memo = probeMemo{}
	}
	for _, cpus := range q.workerCPUs(a, topo, g) {
		if err := memo.probe(cpus, a.class); err != nil {
			return err
		}
	}
	return nil
}

// workerCPUs returns the distinct CPU lists that the workers of q's pools
// would be pinned to with attributes a, topology topo and global unbound
// mask g. It follows installTable's pool keys: per-CPU pools use {c} for
// each online CPU c (the online set for the others); unbound pools use
// the queue's effective mask (the default pwq, and every pod when not
// strict) and, when strict, each pod within the mask.
func (q *Workqueue) workerCPUs(a queueAttrs, topo *topology.Topology, g *topology.CPUSet) [][]int {
	seen := map[string]bool{}
	var out [][]int
	add := func(s topology.CPUSet) {
		if k := s.String(); !seen[k] {
			seen[k] = true
			out = append(out, s.List())
		}
	}
	online := topo.Online
	if !q.unbound {
		ncpu := topo.Possible.Last() + 1
		if n := online.Last() + 1; n > ncpu {
			ncpu = n
		}
		for c := 0; c < ncpu; c++ {
			if online.Has(c) {
				add(topology.NewCPUSet(c))
			} else {
				add(online)
			}
		}
		return out
	}
	scope := a.scope
	if a.scopeDefault {
		scope = defaultScope()
	}
	mask := effectiveCPUs(a.cpus, online, g)
	add(mask)
	if a.strict {
		for _, pod := range topo.Pods(scope) {
			if pm := pod.And(mask); !pm.IsEmpty() {
				add(pm)
			}
		}
	}
	return out
}

// probe tries cpus (none when empty) and class c on a short-lived thread,
// once per distinct pair.
func (m probeMemo) probe(cpus []int, c classAttrs) error {
	attr := probeAttr(c)
	key := fmt.Sprint(cpus, c)
	if err, ok := m[key]; ok {
		return err
	}
	err := probeWorker(cpus, attr)
	m[key] = err
	return err
}

// probeAttr is the class a probe applies for c: nil (none) for the normal
// class at nice 0. A worker that cannot get nice 0 keeps the nice it
// inherits, as documented for the normal class, so nice 0 is never a
// reason to refuse a write.
func probeAttr(c classAttrs) *sched.Attr {
	if c.policy == sched.PolicyNormal && c.nice == 0 {
		return nil
	}
	return &sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice}
}

// probeWorker runs sched.Probe after checking that the process has a
// thread to spare, and turns the kernel's refusal into an error that says
// what to do.
func probeWorker(cpus []int, attr *sched.Attr) error {
	if err := checkThreadHeadroom(); err != nil {
		return fmt.Errorf("cannot try the new attributes on a thread: %w", err)
	}
	err := sched.Probe(cpus, attr)
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, sched.ErrThreadLimit): // the gate, between the check and the probe
		return fmt.Errorf("cannot try the new attributes on a thread: %w", threadErr(err))
	case errors.Is(err, syscall.EINVAL) && len(cpus) > 0 && !errors.Is(err, sched.ErrPermission) && attrRangeOK(attr):
		allowed := "unknown"
		if s, aerr := topology.ProcessAffinity(); aerr == nil {
			allowed = s.String()
		}
		return fmt.Errorf("%w: a worker thread may not run on CPUs %s: they are outside this process's cpuset (cgroup cpuset.cpus, docker --cpuset-cpus; the process may use %s): choose CPUs inside it: %v",
			ErrInvalidArgument, topology.NewCPUSet(cpus...), allowed, err)
	case errors.Is(err, sched.ErrPermission) && attr != nil && (attr.Policy == sched.PolicyFIFO || attr.Policy == sched.PolicyRR):
		return fmt.Errorf("%w: a worker thread may not use %s: %v; %s", ErrPermission, attr, err, sched.Explain(*attr))
	case errors.Is(err, sched.ErrPermission) && attr != nil:
		start := "?"
		if a, gerr := sched.GetAttr(os.Getpid()); gerr == nil {
			start = strconv.Itoa(a.Nice)
		}
		floor := sched.NiceFloor()
		return fmt.Errorf("%w: a worker thread may not set nice %d: %v; this process runs at nice %s and may lower a thread's nice only down to %d (RLIMIT_NICE; CAP_SYS_NICE lifts it): use nice >= %s, or run with CAP_SYS_NICE (root, `setcap cap_sys_nice+ep <binary>`), or raise RLIMIT_NICE to %d (`ulimit -e %d`, nice in /etc/security/limits.conf); %s",
			ErrPermission, attr.Nice, err, start, floor, start, 20-attr.Nice, 20-attr.Nice, sched.Explain(*attr))
	}
	return fmt.Errorf("trying the new attributes on a thread: %w", err)
}

// attrRangeOK reports whether attr is within the ranges sched.SetAttr
// accepts, so that an EINVAL comes from the CPUs.
func attrRangeOK(a *sched.Attr) bool {
	if a == nil {
		return true
	}
	if a.Nice < -20 || a.Nice > 19 {
		return false
	}
	if a.Policy == sched.PolicyFIFO || a.Policy == sched.PolicyRR {
		return a.Priority >= 1 && a.Priority <= 99
	}
	return a.Priority == 0
}

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
