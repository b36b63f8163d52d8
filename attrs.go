package wq

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// Runtime attributes: the equivalent of the kernel's
// /sys/devices/virtual/workqueue/<name>/ files and of the workqueue module
// parameters. Values are strings in the kernel's formats; the typed
// setters below do the same with Go types. Invalid values return an error
// wrapping ErrInvalidArgument and change nothing; writes to attributes that
// an RT queue fixes return ErrReadOnly.

// queueAttrNames lists the per-queue attributes, as in sysfs.
var queueAttrNames = []string{"per_cpu", "max_active", "policy", "nice", "cpumask", "affinity_scope", "affinity_strict"}

// AttrNames returns the names of q's attributes (the unbound-only ones
// only for unbound queues; escape_after, a gowq extension, only for
// per-CPU queues).
func (q *Workqueue) AttrNames() []string {
	if q.unbound {
		return append([]string(nil), queueAttrNames...)
	}
	return append(append([]string(nil), queueAttrNames[:3]...), "escape_after")
}

// Attr reads attribute name of q: per_cpu ("0"/"1"), max_active, policy
// ("normal", "highpri", "fifo"), and for unbound queues nice, cpumask (hex
// mask, as the kernel prints it), affinity_scope ("default" or a scope
// name) and affinity_strict ("0"/"1"), and for per-CPU queues
// escape_after (a Go duration such as "50us", "0" when off; a gowq
// extension, see SetEscapeAfter). Unknown names: ErrInvalidArgument.
func (q *Workqueue) Attr(name string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.attrs
	switch name {
	case "per_cpu":
		return b01(!q.unbound), nil
	case "max_active":
		return strconv.Itoa(int(q.maxActive.Load())), nil
	case "policy":
		return a.policy.String(), nil
	case "escape_after":
		if !q.unbound {
			d := time.Duration(q.escapeAfter.Load())
			if d == 0 {
				return "0", nil
			}
			return strings.ReplaceAll(d.String(), "µ", "u"), nil
		}
	}
	if q.unbound {
		switch name {
		case "nice":
			return strconv.Itoa(a.class.nice), nil
		case "cpumask":
			m := a.cpus
			if m.IsEmpty() {
				m = currentTopology().Possible
			}
			return m.Mask(), nil
		case "affinity_scope":
			if a.scopeDefault {
				return "default", nil
			}
			return a.scope.String(), nil
		case "affinity_strict":
			return b01(a.strict), nil
		}
	}
	return "", fmt.Errorf("%w: workqueue %s has no attribute %q", ErrInvalidArgument, q.name, name)
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// SetAttr writes attribute name of q (see Attr for names and formats).
// per_cpu is read-only (ErrReadOnly). escape_after takes a Go duration
// ("50us", "1ms") or a plain number of microseconds ("50"); see
// SetEscapeAfter. On RT queues nice, affinity_scope,
// affinity_strict and policy are read-only (ErrReadOnly), as with seed
// 002's WQ_RT. Items already running finish on their old workers; new ones
// go to pools with the new attributes. Safe from any goroutine.
func (q *Workqueue) SetAttr(name, value string) error {
	v := strings.TrimSpace(value)
	if q.rt() {
		switch name {
		case "nice", "affinity_scope", "affinity_strict", "policy":
			return fmt.Errorf("%w: %s of RT workqueue %s", ErrReadOnly, name, q.name)
		}
	}
	switch name {
	case "per_cpu":
		return fmt.Errorf("%w: per_cpu of %s", ErrReadOnly, q.name)
	case "max_active":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: max_active %q", ErrInvalidArgument, value)
		}
		return q.SetMaxActive(n)
	case "policy":
		p, err := ParsePolicy(v)
		if err != nil {
			return err
		}
		return q.SetPolicy(p)
	case "escape_after":
		d, err := parseEscapeAfter(v)
		if err != nil {
			return err
		}
		return q.SetEscapeAfter(d)
	}
	if !q.unbound {
		return fmt.Errorf("%w: workqueue %s (per-CPU) has no attribute %q", ErrInvalidArgument, q.name, name)
	}
	switch name {
	case "nice":
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%w: nice %q", ErrInvalidArgument, value)
		}
		return q.SetNice(n)
	case "cpumask":
		m, err := topology.ParseMask(v)
		if err != nil {
			return fmt.Errorf("%w: cpumask %q: %v", ErrInvalidArgument, value, err)
		}
		return q.SetCPUMask(m.List())
	case "affinity_scope":
		if v == "default" {
			return q.setScope(defaultScope(), true)
		}
		s, err := topology.ParseScope(v)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		return q.SetAffinityScope(s)
	case "affinity_strict":
		switch v {
		case "0":
			return q.SetAffinityStrict(false)
		case "1":
			return q.SetAffinityStrict(true)
		}
		return fmt.Errorf("%w: affinity_strict %q (want 0 or 1)", ErrInvalidArgument, value)
	}
	return fmt.Errorf("%w: workqueue %s has no attribute %q", ErrInvalidArgument, q.name, name)
}

// rt reports whether q is an RT queue (flags are immutable after Alloc).
func (q *Workqueue) rt() bool { return q.flags&RT != 0 }

// update applies change to a copy of q's attributes, validates and
// installs the result. Called without q.mu.
//
// The new attributes are validated against what this process can
// actually do (applicable) before they are installed; a refused write
// changes nothing. A write that leaves the attributes as they are is not
// probed: it cannot strand anything that is not stranded already.
func (q *Workqueue) update(what string, change func(a *queueAttrs) error) error {
	attrMu.RLock()
	defer attrMu.RUnlock()
	q.mu.Lock()
	if q.destroying {
		q.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrDestroyed, q.name)
	}
	a := q.attrs
	if err := change(&a); err != nil {
		q.mu.Unlock()
		return fmt.Errorf("workqueue %s: %s: %w", q.name, what, err)
	}
	topo := currentTopology()
	if !a.equal(q.attrs) {
		if err := q.applicable(a, topo, unboundMask.Load(), nil); err != nil {
			q.mu.Unlock()
			return fmt.Errorf("workqueue %s: %s: %w", q.name, what, err)
		}
	}
	q.attrs = a
	q.installTable(topo)
	puts := q.retireIdle()
	q.mu.Unlock()
	putPools(puts)
	return nil
}

// SetPolicy switches q's worker class (the "policy" attribute, seed 001's
// switch): PolicyNormal, PolicyHighPri or PolicyFIFO. Not allowed on RT
// queues (ErrReadOnly). Before it is accepted, the class is applied, with
// the CPU affinity of each pool the queue would use, on a short-lived
// thread, as a new worker would get it: a class the process may not use
// (no CAP_SYS_NICE or rlimit, or a cgroup without an RT budget) returns
// ErrPermission, CPUs it may not use ErrInvalidArgument, and a process
// with no thread to spare for the probe ErrThreadLimit; nothing changes
// then. Blocks for one thread creation per distinct worker CPU set (tens
// of us each). Safe from any goroutine.
func (q *Workqueue) SetPolicy(p Policy) error {
	return q.update("policy", func(a *queueAttrs) error {
		if q.rt() {
			return ErrReadOnly
		}
		if p < PolicyNormal || p > PolicyFIFO {
			return fmt.Errorf("%w: policy %v", ErrInvalidArgument, p)
		}
		c, _, err := resolveClassProbe(p, false, false) // update probes the exact workers
		if err != nil {
			return err
		}
		if p == PolicyNormal && q.unbound {
			c.nice = a.class.nice // keep a nice set through the attribute
			if c.nice < 0 && a.policy != PolicyNormal {
				c.nice = 0
			}
		}
		a.class, a.policy = c, p
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
	return q.update("nice", func(a *queueAttrs) error {
		if !q.unbound || q.rt() {
			return ErrReadOnly
		}
		if nice < -20 || nice > 19 {
			return fmt.Errorf("%w: nice %d (range -20..19)", ErrInvalidArgument, nice)
		}
		if err := sched.CheckNice(nice); err != nil {
			return fmt.Errorf("%w: %w", ErrPermission, err)
		}
		a.class = classAttrs{policy: sched.PolicyNormal, nice: nice}
		a.policy = PolicyNormal
		if nice == -20 {
			a.policy = PolicyHighPri
		}
		return nil
	})
}

// SetCPUMask restricts an unbound queue's workers to cpus (the cpumask
// attribute); CPUs that are not online are kept in the mask but unused. An
// empty list, one with no online CPU, or one whose CPUs a thread of this
// process may not run on (outside its cpuset: sched_setaffinity says
// EINVAL) returns ErrInvalidArgument and changes nothing. "Online" is
// gowq's view: the kernel's online CPUs within the process's affinity and
// cpuset (see OnlineCPUs). Blocks for the probe threads (see SetPolicy).
func (q *Workqueue) SetCPUMask(cpus []int) error {
	return q.update("cpumask", func(a *queueAttrs) error {
		if !q.unbound {
			return ErrReadOnly
		}
		m := topology.NewCPUSet(cpus...)
		if m.And(currentTopology().Online).IsEmpty() {
			return fmt.Errorf("%w: cpumask %v has no online CPU", ErrInvalidArgument, cpus)
		}
		a.cpus = m
		return nil
	})
}

// SetAffinityScope sets an unbound queue's affinity scope. ErrReadOnly on
// RT queues (they are fixed to the cpu scope) and ordered queues. With
// strict affinity each pod's CPU list is tried on a probe thread first;
// one a thread may not be pinned to returns ErrInvalidArgument and changes
// nothing.
func (q *Workqueue) SetAffinityScope(s Scope) error { return q.setScope(s, false) }

func (q *Workqueue) setScope(s Scope, dflt bool) error {
	return q.update("affinity_scope", func(a *queueAttrs) error {
		if !q.unbound || q.rt() || q.ordered {
			return ErrReadOnly
		}
		if s < ScopeCPU || s > ScopeSystem {
			return fmt.Errorf("%w: scope %v", ErrInvalidArgument, s)
		}
		a.scope, a.scopeDefault = s, dflt
		return nil
	})
}

// SetAffinityStrict sets whether an unbound queue's workers stay inside
// their pod (strict) or may leave it after starting an item. ErrReadOnly on
// RT queues (always strict). Validated like SetAffinityScope.
func (q *Workqueue) SetAffinityStrict(strict bool) error {
	return q.update("affinity_strict", func(a *queueAttrs) error {
		if !q.unbound || q.rt() {
			return ErrReadOnly
		}
		a.strict = strict
		return nil
	})
}

// Globals.

var unboundMask atomic.Pointer[topology.CPUSet]

// globalAttrNames lists the process-wide attributes.
var globalAttrNames = []string{"default_affinity_scope", "cpu_intensive_thresh_us", "watchdog_thresh", "cpumask", "highpri_policy", "rt_priority", "power_efficient"}

// GlobalAttrNames returns the names of the process-wide attributes.
func GlobalAttrNames() []string { return append([]string(nil), globalAttrNames...) }

// GlobalAttr reads a process-wide attribute: default_affinity_scope,
// cpu_intensive_thresh_us (us), watchdog_thresh (s), cpumask (the unbound
// cpumask, hex), highpri_policy ("highpri" or "fifo"), rt_priority,
// power_efficient ("Y"/"N").
func GlobalAttr(name string) (string, error) {
	switch name {
	case "default_affinity_scope":
		return defaultScope().String(), nil
	case "cpu_intensive_thresh_us":
		return strconv.FormatInt(cpuIntensiveThresh.Load()/1000, 10), nil
	case "watchdog_thresh":
		return strconv.FormatInt(wdog.thresh.Load()/int64(time.Second), 10), nil
	case "cpumask":
		if m := unboundMask.Load(); m != nil {
			return m.Mask(), nil
		}
		return currentTopology().Possible.Mask(), nil
	case "highpri_policy":
		return HighPriPolicy().String(), nil
	case "rt_priority":
		return strconv.Itoa(RTPriority()), nil
	case "power_efficient":
		if powerEfficient.Load() {
			return "Y", nil
		}
		return "N", nil
	}
	return "", fmt.Errorf("%w: no global attribute %q", ErrInvalidArgument, name)
}

// SetGlobalAttr writes a process-wide attribute (see GlobalAttr). Invalid
// values return ErrInvalidArgument and change nothing; values the process
// cannot apply are refused as by the typed setters (SetUnboundCPUMask,
// SetDefaultAffinityScope, SetHighPriPolicy, SetRTPriority), with
// ErrPermission or ErrInvalidArgument, and change nothing.
func SetGlobalAttr(name, value string) error {
	v := strings.TrimSpace(value)
	bad := func(err error) error {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidArgument, name, value, err)
	}
	switch name {
	case "default_affinity_scope":
		s, err := topology.ParseScope(v)
		if err != nil || s == topology.ScopeDefault {
			return bad(err)
		}
		return SetDefaultAffinityScope(s)
	case "cpu_intensive_thresh_us":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return bad(err)
		}
		return SetCPUIntensiveThresh(time.Duration(n) * time.Microsecond)
	case "watchdog_thresh":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return bad(err)
		}
		return SetWatchdogThresh(time.Duration(n) * time.Second)
	case "cpumask":
		m, err := topology.ParseMask(v)
		if err != nil {
			return bad(err)
		}
		if m.IsEmpty() {
			return bad(fmt.Errorf("empty mask"))
		}
		return SetUnboundCPUMask(m.List())
	case "highpri_policy":
		p, err := ParsePolicy(v)
		if err != nil {
			return err
		}
		return SetHighPriPolicy(p)
	case "rt_priority":
		n, err := strconv.Atoi(v)
		if err != nil {
			return bad(err)
		}
		return SetRTPriority(n)
	case "power_efficient":
		switch strings.ToUpper(v) {
		case "Y", "1":
			SetPowerEfficient(true)
		case "N", "0":
			SetPowerEfficient(false)
		default:
			return bad(fmt.Errorf("want Y or N"))
		}
		return nil
	}
	return fmt.Errorf("%w: no global attribute %q", ErrInvalidArgument, name)
}

// SetUnboundCPUMask restricts every unbound queue to cpus (the kernel's
// workqueue/cpumask, wq_unbound_cpumask); nil or empty restores all CPUs. A
// mask with no online CPU returns ErrInvalidArgument, and so does one that
// the workers of a live unbound queue could not be pinned to (each queue's
// pools are probed as by SetCPUMask); nothing changes then.
func SetUnboundCPUMask(cpus []int) error {
	attrMu.Lock()
	defer attrMu.Unlock()
	var g *topology.CPUSet
	topo := currentTopology()
	if len(cpus) > 0 {
		m := topology.NewCPUSet(cpus...)
		if m.And(topo.Online).IsEmpty() {
			return fmt.Errorf("%w: unbound cpumask %v has no online CPU", ErrInvalidArgument, cpus)
		}
		g = &m
	}
	qs := liveQueues()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	if old := unboundMask.Load(); (old == nil) != (g == nil) || (g != nil && !g.Equal(*old)) {
		if err := checkQueues(qs, topo, g, nil); err != nil {
			return fmt.Errorf("unbound cpumask %v: %w", cpus, err)
		}
	}
	unboundMask.Store(g)
	for _, q := range qs {
		if q.unbound {
			q.reinstall(currentTopology())
		}
	}
	return nil
}

// checkQueues validates the live unbound queues qs for the global unbound
// mask g and, when scope is not nil, the default affinity scope *scope
// (for the queues that follow it). Called with attrMu held for writing.
func checkQueues(qs []*Workqueue, topo *topology.Topology, g *topology.CPUSet, scope *Scope) error {
	memo := probeMemo{}
	for _, q := range qs {
		if !q.unbound || q.destroyed.Load() {
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
	mask := online
	if g != nil {
		if m := g.And(mask); !m.IsEmpty() {
			mask = m
		}
	}
	if !a.cpus.IsEmpty() {
		if m := a.cpus.And(online); !m.IsEmpty() {
			mask = m
		}
	}
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
