package wq

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
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
// only for unbound queues).
func (q *Workqueue) AttrNames() []string {
	if q.unbound {
		return append([]string(nil), queueAttrNames...)
	}
	return append([]string(nil), queueAttrNames[:3]...)
}

// Attr reads attribute name of q: per_cpu ("0"/"1"), max_active, policy
// ("normal", "highpri", "fifo"), and for unbound queues nice, cpumask (hex
// mask, as the kernel prints it), affinity_scope ("default" or a scope
// name) and affinity_strict ("0"/"1"). Unknown names: ErrInvalidArgument.
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
// per_cpu is read-only (ErrReadOnly). On RT queues nice, affinity_scope,
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
func (q *Workqueue) update(what string, change func(a *queueAttrs) error) error {
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
	q.attrs = a
	q.installTable(currentTopology())
	puts := q.retireIdle()
	q.mu.Unlock()
	putPools(puts)
	return nil
}

// SetPolicy switches q's worker class (the "policy" attribute, seed 001's
// switch): PolicyNormal, PolicyHighPri or PolicyFIFO. Not allowed on RT
// queues (ErrReadOnly); PolicyFIFO or PolicyHighPri without the privilege
// returns ErrPermission and changes nothing.
func (q *Workqueue) SetPolicy(p Policy) error {
	return q.update("policy", func(a *queueAttrs) error {
		if q.rt() {
			return ErrReadOnly
		}
		if p < PolicyNormal || p > PolicyFIFO {
			return fmt.Errorf("%w: policy %v", ErrInvalidArgument, p)
		}
		c, _, err := resolveClass(p, false)
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
// on RT and per-CPU queues; ErrPermission for a negative nice without the
// privilege. Mirrors writing the sysfs nice attribute.
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
// empty list or one with no online CPU returns ErrInvalidArgument.
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
// RT queues (they are fixed to the cpu scope) and ordered queues.
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
// RT queues (always strict).
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
// values return ErrInvalidArgument and change nothing.
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
// mask with no online CPU returns ErrInvalidArgument.
func SetUnboundCPUMask(cpus []int) error {
	if len(cpus) == 0 {
		unboundMask.Store(nil)
	} else {
		m := topology.NewCPUSet(cpus...)
		if m.And(currentTopology().Online).IsEmpty() {
			return fmt.Errorf("%w: unbound cpumask %v has no online CPU", ErrInvalidArgument, cpus)
		}
		unboundMask.Store(&m)
	}
	qs := liveQueues()
	sort.Slice(qs, func(i, j int) bool { return qs[i].name < qs[j].name })
	for _, q := range qs {
		if q.unbound {
			q.reinstall(currentTopology())
		}
	}
	return nil
}
