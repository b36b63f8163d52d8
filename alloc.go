package wq

import (
	"fmt"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/internal/topology"
)

// Creating a workqueue: Alloc, AllocOrdered and their Options
// (alloc_workqueue, alloc_ordered_workqueue).

// Alloc creates a workqueue. flags select the pool type (PerCPU, the
// default, or Unbound) and the worker class (normal, HighPri or RT).
// maxActive bounds the items in flight per CPU (per-CPU queues) or in the
// whole system split per NUMA node (unbound queues); 0 means 1024
// (DefaultMaxActive), and a value outside [0, 2048] makes Alloc fail
// with ErrInvalidArgument, as SetMaxActive and WithMaxPending(-1) do (the
// kernel clamps with a warning instead). No worker thread
// is created before the first item is queued; a MemReclaim queue's
// rescuer thread is created here, as alloc_workqueue creates it, so that
// a rescue never needs a new thread. Errors: ErrInvalidFlags for a bit
// that is not one of the exported flags, or contradictory flags
// (PerCPU|Unbound, HighPri|RT), ErrInvalidArgument for an empty name or
// a size out of range (nothing is created), ErrPermission when the
// process may not use the RT class (SCHED_FIFO) or the high-priority one
// (nice -20: CAP_SYS_NICE or RLIMIT_NICE), with the cause and the fix in
// its text (see AllowRTFallback), ErrThreadLimit when the rescuer's thread
// would come too close to a thread limit. A nil Option is ignored.
//
// An RT queue beside default (goroutine-backed) queues keeps its latency:
// while an RT pool lives, the default queues' items leave its reserved P
// free (doc.go, "Wake path", says within which bounds). Beside the
// program's own goroutines it does not, when they keep every P busy. The
// items of a default queue in flight also stay within the thread limits'
// headroom, since the Go runtime starts a thread for each one blocked in
// a system call. Mirrors alloc_workqueue().
func Alloc(name string, flags Flags, maxActive int, opts ...Option) (*Workqueue, error) {
	if err := checkPublicFlags(name, flags); err != nil {
		return nil, err
	}
	return alloc(name, flags, maxActive, opts)
}

// AllocOrdered creates an ordered workqueue: an unbound queue that runs one
// item at a time in queue order, also across attribute changes. Mirrors
// alloc_ordered_workqueue().
func AllocOrdered(name string, flags Flags, opts ...Option) (*Workqueue, error) {
	if err := checkPublicFlags(name, flags); err != nil {
		return nil, err
	}
	if flags&PerCPU != 0 {
		return nil, fmt.Errorf("alloc_ordered_workqueue(%q): %w: ordered queues are unbound", name, ErrInvalidFlags)
	}
	return alloc(name, flags|Unbound|flagOrdered, 1, opts)
}

func validateFlags(name string, flags Flags) error {
	if flags&^(flagOrdered<<1-1) != 0 {
		return fmt.Errorf("alloc_workqueue(%q): %w: unknown bits %#x", name, ErrInvalidFlags, uint32(flags&^(flagOrdered<<1-1)))
	}
	if flags&PerCPU != 0 && flags&Unbound != 0 {
		return fmt.Errorf("alloc_workqueue(%q): %w: PerCPU and Unbound contradict", name, ErrInvalidFlags)
	}
	if flags&HighPri != 0 && flags&RT != 0 {
		return fmt.Errorf("alloc_workqueue(%q): %w: HighPri and RT are distinct classes", name, ErrInvalidFlags)
	}
	return nil
}

func alloc(name string, flags Flags, maxActive int, opts []Option) (*Workqueue, error) {
	if err := validateFlags(name, flags); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		if opt != nil { // a nil Option is no option
			opt(&o)
		}
	}
	if flags&PowerEfficient != 0 && powerEfficient.Load() && flags&PerCPU == 0 {
		flags |= Unbound
	}
	if name == "" {
		return nil, fmt.Errorf("alloc_workqueue: %w: empty name", ErrInvalidArgument)
	}
	if maxActive < 0 || maxActive > MaxActive {
		return nil, fmt.Errorf("alloc_workqueue(%q): %w: max_active %d: must be in [0, %d] (0: %d)", name, ErrInvalidArgument, maxActive, MaxActive, DefaultMaxActive)
	}
	if o.maxPending < 0 {
		return nil, fmt.Errorf("alloc_workqueue(%q): %w: WithMaxPending(%d): must not be negative", name, ErrInvalidArgument, o.maxPending)
	}
	q := &Workqueue{name: name, flags: flags, unbound: flags&Unbound != 0, ordered: flags&flagOrdered != 0,
		panicHandler: o.panicHandler, errorHandler: o.errorHandler, threads: o.threads, logger: o.logger}
	q.bp.max = int64(o.maxPending)
	if maxActive == 0 {
		maxActive = DefaultMaxActive
	}
	q.maxActive.Store(int32(maxActive))

	// Worker class.
	pol := PolicyNormal
	switch {
	case flags&RT != 0:
		pol = PolicyFIFO
	case flags&HighPri != 0:
		pol = PolicyHighPri
	}
	class, fellBack, reason, err := resolveClass(pol, o.fallback)
	if err != nil {
		return nil, fmt.Errorf("alloc_workqueue(%q): %w", name, err)
	}
	if fellBack {
		// Report the class actually obtained: HighPri (nice -20) or normal.
		got := PolicyNormal
		q.flags &^= RT | HighPri
		if class.nice < 0 {
			got = PolicyHighPri
			q.flags |= HighPri
		}
		report.Logger(o.logger).Warn("workqueue: worker class not permitted, falling back", "workqueue", name, "asked", pol.String(), "got", got.String(), "reason", reason)
		pol = got
		q.fellBack = true
		q.fallbackReason = reason
	}
	q.attrs = queueAttrs{class: class, policy: pol, scope: defaultScope(), scopeDefault: true}
	if q.flags&RT != 0 && q.unbound {
		// RT unbound queues get the cpu scope, strictly, fixed at Alloc.
		q.attrs.scope = topology.ScopeCPU
		q.attrs.strict = true
		q.attrs.scopeDefault = false
	}
	if q.ordered {
		q.attrs.scope = topology.ScopeSystem
		q.attrs.scopeDefault = false
	}
	if o.escapeSet && (o.escapeAfter < 0 || q.unbound) {
		return nil, fmt.Errorf("alloc_workqueue(%q): %w: escape_after %v: only per-CPU queues, and not negative", name, ErrInvalidArgument, o.escapeAfter)
	}
	if flags&MemReclaim != 0 {
		// The rescuer's thread starts now, as alloc_workqueue creates
		// the rescuer: when workers cannot be created (a thread limit),
		// the rescue needs no thread.
		q.rescuer = newRescuer(q)
		if err := q.rescuer.start(); err != nil {
			return nil, fmt.Errorf("alloc_workqueue(%q): rescuer: %w", name, err)
		}
	}
	topo, g := currentTopology(), unboundMask.Load()
	q.mu.Lock()
	q.installTable(topo)
	q.mu.Unlock()
	registerQueue(q)
	// SetUnboundCPUMask and hotplug publish the new global mask or
	// topology first and then re-apply to the queues they list; a queue
	// registered after that listing built its table from what they
	// replaced. Registering first and looking again after closes that
	// window without a lock (the kernel holds wq_pool_mutex across
	// alloc_workqueue's apply and list_add): either the listing saw q,
	// or q sees what was published.
	if q.unbound && (unboundMask.Load() != g || currentTopology() != topo) {
		q.reinstall(currentTopology())
	}
	if o.escapeSet && o.escapeAfter > 0 {
		_ = q.SetEscapeAfter(o.escapeAfter) // validated above
	}
	return q, nil
}
