package wq

import (
	"fmt"
	"slices"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// One apply path.
//
// Every change of a queue's attributes, whatever its form, goes through
// applyAttrs, as every sysfs store function and apply_workqueue_attrs()
// meet in the kernel's apply_wqattrs_prepare/commit: the typed setters
// (SetPolicy, SetNice, SetCPUMask, SetAffinityScope, SetAffinityStrict,
// SetMaxActive, SetEscapeAfter) change one field of the queue's current
// Attrs, SetAttr parses its string into one field, and ApplyAttrs takes a
// whole Attrs. applyAttrs checks the whole result (ranges, read-only
// fields, the class the process may use), tries the pools it selects on a
// probe thread (see "Attribute validation" in attrs.go), and only then
// installs everything at once under q.mu: a refused write changes nothing,
// and a write of the values Attrs returns now changes nothing. A saved
// Attrs is not a saved state: once SetHighPriPolicy or SetRTPriority
// changed what its policy resolves to, applying it again resolves that
// policy anew (and may refuse its nice); SetAttrQueues restores exact
// states.

// Attrs are a workqueue's attributes in one typed value: the fields the
// kernel's struct workqueue_attrs holds (nice, cpumask, affinity scope,
// strict) and the ones of struct workqueue_struct that sysfs exposes
// (max_active, and gowq's policy and escape_after). Attrs returns them;
// ApplyAttrs installs a whole Attrs, all or nothing.
//
// Zero values: Scope's zero value is ScopeDefault ("default": the queue
// follows the default affinity scope, see SetDefaultAffinityScope), and a
// nil or empty CPUs means every CPU (the queue's own cpumask does not
// restrict it; the global unbound cpumask still does). A zero MaxActive
// is out of range for ApplyAttrs. So ApplyAttrs takes a full Attrs: start
// from the one Attrs returns and change what must change.
type Attrs struct {
	// Policy is the worker class (the "policy" attribute).
	Policy Policy
	// Nice is the workers' nice (-20..19). It is the "nice" attribute of
	// an unbound queue of PolicyNormal; on the other queues (per-CPU, RT)
	// and classes (HighPri, FIFO) the class fixes it, and Attrs reports
	// that value. A goroutine-backed queue (nice 0 or the nice of every
	// thread the runtime may run its items on;
	// Workqueue.GoroutineBacked) has no threads of its own: its items
	// run at the nice of the process's threads, whatever Nice says.
	Nice int
	// CPUs is an unbound queue's own cpumask (the "cpumask" attribute), in
	// increasing order; nil means every CPU. Always nil on a per-CPU queue.
	// The CPUs the workers may use are this set intersected with the
	// global unbound cpumask and the online CPUs (see SetUnboundCPUMask).
	CPUs []int
	// Scope is an unbound queue's affinity scope; ScopeDefault follows
	// the default. Always ScopeDefault on a per-CPU queue.
	Scope Scope
	// Strict is an unbound queue's affinity_strict. Always false on a
	// per-CPU queue.
	Strict bool
	// MaxActive is the queue's max_active, 1..2048 (1 for an ordered queue).
	MaxActive int
	// EscapeAfter is a per-CPU queue's escape_after (0: off); always 0 on
	// an unbound queue. See SetEscapeAfter.
	EscapeAfter time.Duration
}

// Attrs returns q's attributes now. The slice is the caller's. Safe from
// any goroutine; never blocks beyond q's attribute lock. After Destroy it
// returns the last attributes.
func (q *Workqueue) Attrs() Attrs {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.attrsLocked()
}

// attrsLocked is Attrs with q.mu held.
func (q *Workqueue) attrsLocked() Attrs {
	a := q.attrs
	out := Attrs{
		Policy:      a.policy,
		Nice:        a.class.nice,
		MaxActive:   int(q.maxActive.Load()),
		EscapeAfter: time.Duration(q.escapeAfter.Load()),
	}
	if q.unbound {
		if !a.cpus.IsEmpty() {
			out.CPUs = a.cpus.List()
		}
		out.Scope = a.scope
		if a.scopeDefault {
			out.Scope = topology.ScopeDefault
		}
		out.Strict = a.strict
	}
	return out
}

// ApplyAttrs installs a as q's attributes, all or nothing, as the
// kernel's apply_workqueue_attrs() does: either every field is in force
// when it returns nil, or nothing changed. Pass a full Attrs (see Attrs
// for what zero values mean): typically the value Attrs returned with
// some fields changed.
//
// Fields that q fixes (read-only) are accepted when they hold the value
// Attrs reports, and refused with ErrReadOnly when they differ: Policy,
// Scope and Strict of an RT queue, Scope of an ordered queue, CPUs, Scope
// and Strict of a per-CPU queue. Nice, where the class fixes it, may hold
// the value Attrs reports or the nice of the new Policy's class; another
// value is ErrReadOnly. Other errors, each with nothing changed:
// ErrInvalidArgument for a value out of range (MaxActive outside 1..2048,
// or not 1 on an ordered queue; Nice outside -20..19; a negative
// EscapeAfter, or a non-zero one on an unbound queue; an unknown Policy
// or Scope; a CPU outside 0..65535, or CPUs none of which is online) or
// CPUs a thread of the process may not run on; ErrPermission for a class
// or nice the process may not use; ErrThreadLimit when no thread can be
// spared for the probe; ErrDestroyed once Destroy began. The new pools
// are tried on a short-lived thread first (see SetPolicy), so the call
// blocks for one thread creation per distinct worker CPU set when the
// pools change. Items already running finish on their old workers. Safe
// from any goroutine.
func (q *Workqueue) ApplyAttrs(a Attrs) error {
	return q.applyAttrs("attrs", func(cur *Attrs) error {
		*cur = a
		return nil
	})
}

// applyAttrs applies change to q's current Attrs and installs the result
// (the one apply path). change runs with q.mu held and must not block.
func (q *Workqueue) applyAttrs(what string, change func(a *Attrs) error) error {
	if q == nil {
		return errNilQueue // every attribute write on a nil queue
	}
	attrMu.RLock()
	defer attrMu.RUnlock()
	return q.applyAttrsLocked(what, change)
}

// applyAttrsLocked is applyAttrs with attrMu held (for reading or
// writing): the kernel's apply_wqattrs_prepare (check and probe) followed
// by apply_wqattrs_commit (commitAttrs).
func (q *Workqueue) applyAttrsLocked(what string, change func(a *Attrs) error) error {
	q.mu.Lock()
	if q.life.load().destroying() {
		q.mu.Unlock()
		return fmt.Errorf("workqueue %s: %s: %w", q.name, what, ErrDestroyed)
	}
	cur := q.attrsLocked()
	want := cur
	want.CPUs = slices.Clone(cur.CPUs)
	if err := change(&want); err != nil {
		q.mu.Unlock()
		return fmt.Errorf("workqueue %s: %s: %w", q.name, what, err)
	}
	na, err := q.resolveAttrs(cur, want)
	if err != nil {
		q.mu.Unlock()
		return fmt.Errorf("workqueue %s: %s: %w", q.name, what, err)
	}
	topo := currentTopology()
	if !na.equal(q.attrs) {
		if err := q.applicable(na, topo, unboundMask.Load(), nil); err != nil {
			q.mu.Unlock()
			return fmt.Errorf("workqueue %s: %s: %w", q.name, what, err)
		}
	}
	q.commitAttrs(topo, attrsState{attrs: na, maxActive: want.MaxActive, escapeAfter: want.EscapeAfter})
	return nil
}

// attrsState is everything an attribute write changes in a queue: the
// pool-selecting attributes with the class in force (which Attrs reports
// only as a policy and a nice), max_active and escape_after.
type attrsState struct {
	attrs       queueAttrs
	maxActive   int
	escapeAfter time.Duration
}

// stateLocked returns q's attrsState. Called with q.mu held.
func (q *Workqueue) stateLocked() attrsState {
	return attrsState{attrs: q.attrs, maxActive: int(q.maxActive.Load()), escapeAfter: time.Duration(q.escapeAfter.Load())}
}

// commitAttrs installs st, already checked, as q's attributes on topo.
// Nothing in it fails. Called with q.mu held; it releases q.mu.
func (q *Workqueue) commitAttrs(topo *topology.Topology, st attrsState) {
	var puts []*pool
	if !st.attrs.equal(q.attrs) {
		q.attrs = st.attrs
		q.installTable(topo)
		puts = q.retireIdle()
	}
	var lims []*activeLimit
	if st.maxActive != int(q.maxActive.Load()) {
		q.maxActive.Store(int32(st.maxActive))
		q.setNodeMax(topo)
		lims = append(lims, q.lims...)
	}
	escChanged := int64(st.escapeAfter) != q.escapeAfter.Load()
	var escPwqs []*pwq
	if escChanged {
		if st.escapeAfter > 0 && q.escaper.Load() == nil {
			r := newRescuer(q)
			r.escape = true
			q.escaper.Store(r)
		}
		q.escapeAfter.Store(int64(st.escapeAfter))
		if st.escapeAfter > 0 {
			escPwqs = append(escPwqs, q.allPwqs...)
		}
	}
	q.mu.Unlock()

	putPools(puts)
	// Items waiting on the inactive lists are activated at once if the
	// new max_active allows.
	for _, l := range lims {
		l.scan(nil)
	}
	if lims != nil {
		q.wakeRoom() // max_active moves the MaxPending bound (backpressure.go)
	}
	if escChanged {
		recomputeEscMin()
		// Items already on a worklist: mark their pools for the CM
		// monitor's scan (an activation would have; a pool with none is
		// unmarked by the next scan).
		for _, pq := range escPwqs {
			p := pq.pool
			p.mu.Lock()
			if !p.dead {
				p.escNotify()
			}
			p.mu.Unlock()
		}
	}
}

// restoreState puts back st, which q had under the same hold of attrMu
// (for writing): no probe, since it was in force a moment ago, and the
// exact class, not one resolved again from its policy. A queue that
// Destroy began meanwhile is left alone.
func (q *Workqueue) restoreState(st attrsState) {
	q.mu.Lock()
	if q.life.load().destroying() {
		q.mu.Unlock()
		return
	}
	q.commitAttrs(currentTopology(), st)
}

// resolveAttrs checks want against q (cur is q's Attrs now) and returns
// the queueAttrs it selects. Called with q.mu held; never blocks (the
// class is checked statically here, on a thread by the caller's probe).
func (q *Workqueue) resolveAttrs(cur, want Attrs) (queueAttrs, error) {
	na := q.attrs
	if want.MaxActive < 1 || want.MaxActive > MaxActive {
		return na, fmt.Errorf("%w: max_active %d: range [1, %d]", ErrInvalidArgument, want.MaxActive, MaxActive)
	}
	if q.ordered && want.MaxActive != 1 {
		return na, fmt.Errorf("%w: max_active %d: ordered queues have max_active 1", ErrInvalidArgument, want.MaxActive)
	}
	if want.EscapeAfter < 0 {
		return na, fmt.Errorf("%w: escape_after %v: negative", ErrInvalidArgument, want.EscapeAfter)
	}
	if q.unbound && want.EscapeAfter != 0 {
		return na, fmt.Errorf("%w: escape_after %v: only per-CPU queues escape (unbound items already run anywhere in their pod)", ErrInvalidArgument, want.EscapeAfter)
	}
	if want.Policy < PolicyNormal || want.Policy > PolicyFIFO {
		return na, fmt.Errorf("%w: policy %v", ErrInvalidArgument, want.Policy)
	}
	if q.rt() && want.Policy != cur.Policy {
		return na, fmt.Errorf("%w: policy of an RT queue", ErrReadOnly)
	}
	if !want.Scope.Valid() {
		return na, fmt.Errorf("%w: affinity scope %v", ErrInvalidArgument, want.Scope)
	}
	for _, c := range want.CPUs {
		if c < 0 || c >= topology.MaxCPUs {
			return na, fmt.Errorf("%w: cpumask: CPU %d outside [0, %d]", ErrInvalidArgument, c, topology.MaxCPUs-1)
		}
	}

	if !q.unbound {
		switch {
		case len(want.CPUs) > 0:
			return na, fmt.Errorf("%w: cpumask of a per-CPU queue", ErrReadOnly)
		case want.Scope != topology.ScopeDefault:
			return na, fmt.Errorf("%w: affinity_scope of a per-CPU queue", ErrReadOnly)
		case want.Strict:
			return na, fmt.Errorf("%w: affinity_strict of a per-CPU queue", ErrReadOnly)
		}
	} else {
		if (q.rt() || q.ordered) && want.Scope != cur.Scope {
			return na, fmt.Errorf("%w: affinity_scope of an RT or ordered queue", ErrReadOnly)
		}
		if q.rt() && want.Strict != cur.Strict {
			return na, fmt.Errorf("%w: affinity_strict of an RT queue (always strict)", ErrReadOnly)
		}
		m := topology.NewCPUSet(want.CPUs...)
		if len(want.CPUs) > 0 && m.And(currentTopology().Online).IsEmpty() {
			return na, fmt.Errorf("%w: cpumask %v has no online CPU", ErrInvalidArgument, want.CPUs)
		}
		na.cpus = m
		na.scopeDefault = want.Scope == topology.ScopeDefault
		na.scope = want.Scope
		if na.scopeDefault {
			na.scope = defaultScope()
		}
		na.strict = want.Strict
	}

	// The class. Unchanged policy and nice keep the class in force, so
	// that writing back what Attrs returned changes nothing even after
	// SetRTPriority or SetHighPriPolicy changed what a new class means.
	if want.Policy == cur.Policy && want.Nice == cur.Nice {
		return na, nil
	}
	if q.unbound && !q.rt() && want.Policy == PolicyNormal {
		if want.Nice < -20 || want.Nice > 19 {
			return na, fmt.Errorf("%w: nice %d (range -20..19)", ErrInvalidArgument, want.Nice)
		}
		if err := sched.CheckNice(want.Nice); err != nil {
			return na, fmt.Errorf("%w: %w", ErrPermission, err)
		}
		na.class = classAttrs{policy: sched.PolicyNormal, nice: want.Nice}
		na.policy = PolicyNormal
		if want.Nice == -20 {
			// Nice -20 is the high-priority class's nice: the queue
			// reports the highpri policy, as SetNice documents.
			na.policy = PolicyHighPri
		}
		return na, nil
	}
	c, _, err := resolveClassProbe(want.Policy, false, false) // the caller probes the exact workers
	if err != nil {
		return na, err
	}
	if want.Nice != cur.Nice && want.Nice != c.nice {
		return na, fmt.Errorf("%w: nice %d: the %v class of this queue fixes nice at %d", ErrReadOnly, want.Nice, want.Policy, c.nice)
	}
	na.class, na.policy = c, want.Policy
	return na, nil
}
