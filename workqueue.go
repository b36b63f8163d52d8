package wq

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
	"github.com/gowq/wq/wqtrace"
)

// Limits on max_active, as in the kernel.
const (
	MaxActive        = 2048 // WQ_MAX_ACTIVE
	DefaultMaxActive = 1024 // WQ_DFL_ACTIVE, used when 0 is given
	DefaultMinActive = 8    // WQ_DFL_MIN_ACTIVE: per-node floor of unbound queues
)

// cpuUnbound is WORK_CPU_UNBOUND: no CPU was asked for.
const cpuUnbound = wqtrace.WorkCPUUnbound

// Workqueue is a named queue of work items with a pool type, a worker class
// and a max_active (struct workqueue_struct). All methods are safe from any
// goroutine.
type Workqueue struct {
	name    string
	flags   Flags
	unbound bool
	ordered bool
	threads bool // immutable after Alloc: Threads option (gopool.go)

	mu             sync.Mutex               // serialises attribute changes and Destroy
	table          atomic.Pointer[pwqTable] // current CPU -> pwq mapping
	allPwqs        []*pwq                   // guarded by mu: every pwq ever installed (flush, drain, stats)
	lims           []*activeLimit           // guarded by mu: per CPU (per-CPU) or per node (unbound)
	maxActive      atomic.Int32
	attrs          queueAttrs                     // guarded by mu
	rescuer        *rescuer                       // immutable after Alloc
	retired        pwqStats                       // counters of released pwqs (atomic)
	fellBack       bool                           // immutable after Alloc: got a lower class than asked
	fallbackReason string                         // immutable after Alloc: why fellBack (the first blocker)
	panicHandler   func(PanicInfo)                // immutable after Alloc: WithPanicHandler, nil for the process-wide one
	bp             backpressure                   // MaxPending and QueueContext's waiters (backpressure.go)
	logger         *slog.Logger                   // immutable after Alloc: WithLogger, nil for the process-wide one
	errorHandler   func(op, fn string, err error) // immutable after Alloc: WithErrorHandler, nil for the process-wide one

	// Lock-free queue calls (incoming.go) and, of them, those bounced back
	// to the locked path: per queue, not per pwq, as the pwq of a bounced
	// push was retired, its counters already folded into retired.
	pushed, bounced atomic.Int64

	// Armed delayed items (Destroy cancels them). timerMu is a leaf lock,
	// taken after Work.mu.
	timerMu        sync.Mutex
	armed          timerList     // guarded by timerMu
	timersClosed   bool          // guarded by timerMu: Destroy began; arming is refused
	firing         int           // guarded by timerMu: timerFns running for q
	timerIdle      chan struct{} // guarded by timerMu: closed when firing drops to 0
	timerCancelled []string      // guarded by timerMu: items cancelled by closeTimers

	frozen     atomic.Bool // FreezeAll: new activeLimits start frozen
	destroying bool        // guarded by mu: Destroy began; attribute changes are refused
	dying      atomic.Bool // Destroy began: queue refusals say errDestroying, not ErrDraining
	draining   atomic.Int32
	destroyed  atomic.Bool
	reported   atomic.Bool // ErrDestroyed reported once
	// drainReported: ErrDraining was reported in the current drain (once
	// per drain: a producer that keeps queueing would report thousands).
	drainReported atomic.Bool
	destroyMu     sync.Mutex
	destroyDone   chan struct{} // guarded by destroyMu: closed when the destroy that began has finished (shutdown.go)

	flushMu        sync.Mutex    // serialises flushers
	flushLeft      atomic.Int32  // pwqs the current flush still waits for
	flushDone      chan struct{} // guarded by flushMu; closed when flushLeft reaches 0
	flushAbandoned chan struct{} // guarded by flushMu: done channel of a flush whose context ended

	keyed  atomic.Pointer[keyTable] // per-key ordering (keyed.go), created by the first QueueKeyed
	keyedN atomic.Int64             // keyed instances in flight (chained, queued or running)
	// Adaptive placement (escape.go).
	escaper     atomic.Pointer[rescuer] // per-CPU queues with escape_after: set once, under mu
	escapeAfter atomic.Int64            // ns; 0: items never escape
}

// pwqTable maps each possible CPU to the pwq that serves items queued
// from or on it. Replaced as a whole on attribute changes and hotplug.
type pwqTable struct {
	cpu  []*pwq // indexed by CPU id
	dfl  *pwq   // unbound: for CPUs outside the queue's cpumask
	pods []*pwq // unbound: one per pod, in pod order
}

// queueAttrs are a workqueue's runtime attributes.
type queueAttrs struct {
	class  classAttrs
	policy Policy
	cpus   topology.CPUSet // unbound cpumask; empty means all
	scope  topology.Scope
	strict bool
	// scopeDefault: the scope follows default_affinity_scope ("default").
	scopeDefault bool
}

// Alloc creates a workqueue. flags select the pool type (PerCPU, the
// default, or Unbound) and the worker class (normal, HighPri or RT).
// maxActive bounds the items in flight per CPU (per-CPU queues) or in the
// whole system split per NUMA node (unbound queues); 0 means 1024, and a
// value outside [1, 2048] is clamped with a slog warning. No worker thread
// is created before the first item is queued; a MemReclaim queue's
// rescuer thread is created here, as alloc_workqueue creates it, so that
// a rescue never needs a new thread. Errors: ErrInvalidFlags for a bit
// that is not one of the exported flags, or contradictory flags
// (PerCPU|Unbound, HighPri|RT), ErrPermission when the
// process may not use the RT class (SCHED_FIFO) or the high-priority one
// (nice -20: CAP_SYS_NICE or RLIMIT_NICE), with the cause and the fix in
// its text (see AllowRTFallback), ErrThreadLimit when the rescuer's thread
// would come too close to a thread limit. A nil Option is ignored. Mirrors
// alloc_workqueue().
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
	if o.maxPending < 0 {
		return nil, fmt.Errorf("alloc_workqueue(%q): %w: MaxPending(%d): must not be negative", name, ErrInvalidArgument, o.maxPending)
	}
	q := &Workqueue{name: name, flags: flags, unbound: flags&Unbound != 0, ordered: flags&flagOrdered != 0,
		panicHandler: o.panicHandler, errorHandler: o.errorHandler, threads: o.threads, logger: o.logger}
	q.bp.max = int64(o.maxPending)
	if maxActive == 0 {
		maxActive = DefaultMaxActive
	}
	if maxActive < 1 || maxActive > MaxActive {
		c := min(max(maxActive, 1), MaxActive)
		report.Logger(o.logger).Warn("workqueue: max_active out of range, clamped", "workqueue", name, "requested", maxActive, "range", "[1, 2048]", "clamped", c)
		maxActive = c
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
		// Seed 002: RT unbound queues get the cpu scope, strictly.
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

// Option adjusts Alloc.
type Option func(*options)

type options struct {
	fallback     bool
	panicHandler func(PanicInfo)
	errorHandler func(op, fn string, err error)
	escapeAfter  time.Duration
	escapeSet    bool
	threads      bool // Threads: thread workers even where goroutines would do
	maxPending   int
	logger       *slog.Logger
}

// AllowRTFallback makes Alloc of an RT queue that the process may not run
// at SCHED_FIFO fall back, with a slog warning, instead of failing with
// ErrPermission: to the HighPri class (nice -20) when the process may take
// nice -20, else to the normal class (nice 0), as an unprivileged process
// without RLIMIT_NICE gets. A HighPri queue without the privilege for nice
// -20 falls back to the normal class likewise. Stats() shows the class
// obtained (Policy), Fallback true and FallbackReason the refusals: for an
// RT queue that got the normal class, both SCHED_FIFO's and nice -20's.
func AllowRTFallback() Option { return func(o *options) { o.fallback = true } }

// WithPanicHandler gives the queue its own panic handler: panics of work
// functions run from this queue call h, as SetPanicHandler describes,
// instead of the process-wide handler. nil (the default) means the
// process-wide one (SetPanicHandler, or its slog default). So that two
// libraries in one program each see their own panics.
func WithPanicHandler(h func(PanicInfo)) Option {
	return func(o *options) { o.panicHandler = h }
}

// WithErrorHandler gives the queue its own error handler: usage errors of
// operations on this queue (queueing on it, QueueDelayed, ModDelayed,
// Flush, Drain, Destroy) call h, as SetErrorHandler describes, instead of
// the process-wide handler. nil (the default) means the process-wide one
// (SetErrorHandler, or its slog default). Errors of operations on an item
// alone (Work.Flush, Work.Cancel, ...) and of the shared worker pools
// still go to the process-wide handler.
func WithErrorHandler(h func(op, fn string, err error)) Option {
	return func(o *options) { o.errorHandler = h }
}

// Name returns the queue's name.
func (q *Workqueue) Name() string { return q.name }

// Flags returns the queue's flags, as given to Alloc (after a permitted
// fallback, RT is replaced by HighPri).
func (q *Workqueue) Flags() Flags { return q.flags }

// QueueType is the kind of queue, by the pools its items run on: the TYPE
// column of the kernel's tools/workqueue/wq_dump.py.
type QueueType uint8

const (
	TypePerCPU  QueueType = iota // per-CPU pools (Alloc without Unbound)
	TypeUnbound                  // unbound pools, per pod (Alloc with Unbound)
	TypeOrdered                  // an ordered queue (AllocOrdered): unbound, one item at a time
)

// String returns "percpu", "unbound" or "ordered", as wq_dump.py prints
// the type.
func (t QueueType) String() string {
	switch t {
	case TypePerCPU:
		return "percpu"
	case TypeUnbound:
		return "unbound"
	case TypeOrdered:
		return "ordered"
	}
	return "QueueType(" + strconv.Itoa(int(t)) + ")"
}

// Type returns the queue's type, fixed at Alloc: TypeOrdered for a queue
// from AllocOrdered, TypeUnbound for other unbound queues (also a
// PowerEfficient queue made unbound), TypePerCPU otherwise. Never blocks.
func (q *Workqueue) Type() QueueType {
	switch {
	case q.ordered:
		return TypeOrdered
	case q.unbound:
		return TypeUnbound
	}
	return TypePerCPU
}

// installTable builds the CPU -> pwq table for the current attributes and
// topology and installs it. Old pwqs keep their items, which run to
// completion on their old pools. Called with mu held.
func (q *Workqueue) installTable(topo *topology.Topology) {
	ncpu := topo.Possible.Last() + 1
	if n := topo.Online.Last() + 1; n > ncpu {
		ncpu = n
	}
	t := &pwqTable{cpu: make([]*pwq, ncpu)}
	maxA := int(q.maxActive.Load())
	if !q.unbound {
		for len(q.lims) < ncpu {
			l := &activeLimit{}
			l.max.Store(int32(maxA))
			l.frozen.Store(q.frozen.Load()) // a CPU hot-added while frozen
			q.lims = append(q.lims, l)
		}
		online := topo.Online
		for c := 0; c < ncpu; c++ {
			cpus := []int{c}
			if !online.Has(c) {
				cpus = online.List()
			}
			p := getPool(poolKey{cpu: c, class: q.attrs.class}, cpus)
			t.cpu[c] = q.newPwq(p, q.lims[c])
		}
		q.table.Store(t)
		return
	}
	if q.attrs.scopeDefault {
		q.attrs.scope = defaultScope()
	}
	mask := effectiveCPUs(q.attrs.cpus, topo.Online, unboundMask.Load())
	pods := topo.Pods(q.attrs.scope)
	if q.goroutineBacked(mask, topo.Online) {
		// Goroutine workers run on any CPU: pods would only split the
		// queue over pools that differ in nothing (gopool.go).
		pods = []topology.CPUSet{mask}
	}
	// One activeLimit per node, reused across attribute changes.
	nodeLim := func(node int) *activeLimit {
		idx := 0
		if !q.ordered {
			idx = node
		}
		for len(q.lims) <= idx {
			l := &activeLimit{ordered: q.ordered}
			l.frozen.Store(q.frozen.Load())
			q.lims = append(q.lims, l)
		}
		return q.lims[idx]
	}
	mkPwq := func(pod topology.CPUSet) *pwq {
		allow := mask
		if q.attrs.strict {
			allow = pod
		}
		key := poolKey{cpu: -1, class: q.attrs.class, pod: pod.String(), allow: allow.String(), strict: q.attrs.strict,
			goro: q.goroutineBacked(allow, topo.Online)}
		p := getPool(key, allow.List())
		return q.newPwq(p, nodeLim(topo.NodeOf(pod.First())))
	}
	t.dfl = mkPwq(mask)
	for _, pod := range pods {
		pm := pod.And(mask)
		if pm.IsEmpty() {
			continue
		}
		var pq *pwq
		if pm.Equal(mask) {
			pq = t.dfl
		} else {
			pq = mkPwq(pm)
		}
		t.pods = append(t.pods, pq)
		for _, c := range pm.List() {
			if c < ncpu {
				t.cpu[c] = pq
			}
		}
	}
	for c := range t.cpu {
		if t.cpu[c] == nil {
			t.cpu[c] = t.dfl
		}
	}
	q.setNodeMax(topo)
	q.table.Store(t)
}

// reinstall rebuilds q's table for topo and releases the retired pwqs that
// hold no items. Called without q.mu.
func (q *Workqueue) reinstall(topo *topology.Topology) {
	q.mu.Lock()
	if q.destroying {
		q.mu.Unlock()
		return
	}
	q.installTable(topo)
	puts := q.retireIdle()
	q.mu.Unlock()
	putPools(puts)
}

// retireIdle releases the pwqs that the current table no longer uses and
// that hold no items: they are marked dead (a queue call that picked one
// from an old table retries), leave their limit and q.allPwqs, and their
// counters move to q.retired. It returns the pools to put once q.mu is
// released. Called with q.mu held. Retired pwqs that still hold items stay
// until a later call.
func (q *Workqueue) retireIdle() []*pool {
	t := q.table.Load()
	current := make(map[*pwq]bool, len(t.cpu)+len(t.pods)+1)
	for _, pq := range t.cpu {
		current[pq] = true
	}
	for _, pq := range t.pods {
		current[pq] = true
	}
	if t.dfl != nil {
		current[t.dfl] = true
	}
	var puts []*pool
	keep := make([]*pwq, 0, len(q.allPwqs))
	for _, pq := range q.allPwqs {
		if current[pq] {
			keep = append(keep, pq)
			continue
		}
		p := pq.pool
		p.mu.Lock()
		idle := pq.markPwqDead(true)
		p.mu.Unlock()
		if !idle {
			keep = append(keep, pq)
			continue
		}
		pq.lim.removePwq(pq)
		q.retired.addFrom(&pq.stats)
		puts = append(puts, p)
	}
	q.allPwqs = keep
	return puts
}

func putPools(ps []*pool) {
	for _, p := range ps {
		p.put()
	}
}

// setNodeMax splits max_active over NUMA nodes in proportion to their
// online CPUs, each node getting at least min(max_active, 8)
// (wq_update_node_max_active). Called with mu held.
func (q *Workqueue) setNodeMax(topo *topology.Topology) {
	maxA := int(q.maxActive.Load())
	if q.ordered || !q.unbound {
		for _, l := range q.lims {
			l.max.Store(int32(maxA))
		}
		return
	}
	total := topo.Online.Len()
	floor := min(maxA, DefaultMinActive)
	for node, l := range q.lims {
		n := nodeCPUs(topo, node).Len()
		v := maxA
		if total > 0 {
			v = (maxA*n + total - 1) / total
		}
		l.max.Store(int32(max(v, floor)))
	}
}

func (q *Workqueue) newPwq(p *pool, l *activeLimit) *pwq {
	pq := &pwq{wq: q, pool: p, lim: l}
	l.addPwq(pq)
	q.allPwqs = append(q.allPwqs, pq)
	return pq
}

// Queue queues w on the pwq of the CPU the caller runs on now (per-CPU
// queues) or of that CPU's pod (unbound queues). It returns false if w was
// already pending or is disabled, true if it queued it. It never blocks and
// makes no allocation. On a destroyed queue it returns false and reports
// ErrDestroyed (once per queue) to the error handler; QueueErr returns
// the reason instead. Mirrors queue_work().
func (q *Workqueue) Queue(w *Work) bool {
	return q.queueResult("queue_work_on", w, q.queueOnErr(cpuUnbound, w, nil))
}

// QueueOn queues w on CPU cpu's pwq: for a per-CPU queue the item runs on
// that CPU (or, if the CPU went offline, on the remaining CPUs); for an
// unbound queue in that CPU's pod. Returns as Queue; a cpu that does not
// exist returns false and reports ErrInvalidCPU. Mirrors queue_work_on().
func (q *Workqueue) QueueOn(cpu int, w *Work) bool {
	return q.queueResult("queue_work_on", w, q.queueOnChecked(cpu, w))
}

// queueOnChecked is QueueOn without the report: it checks cpu first.
func (q *Workqueue) queueOnChecked(cpu int, w *Work) error {
	if w == nil {
		return ErrNoFunc
	}
	if q.destroyed.Load() {
		return ErrDestroyed
	}
	if cpu < 0 || cpu >= len(q.table.Load().cpu) {
		return fmt.Errorf("%w: %d", ErrInvalidCPU, cpu)
	}
	return q.queueOnErr(cpu, w, nil)
}

// QueueNode queues w on a CPU of NUMA node node, preferring the caller's
// CPU when it belongs to the node. Returns as Queue; an unknown node
// returns false and reports ErrInvalidArgument. Mirrors queue_work_node().
func (q *Workqueue) QueueNode(node int, w *Work) bool {
	topo := currentTopology()
	cpus := nodeCPUs(topo, node)
	if cpus.IsEmpty() {
		q.reportError("queue_work_node", w.Func(), fmt.Errorf("%w: node %d has no online CPU", ErrInvalidArgument, node))
		return false
	}
	cpu := currentCPU()
	if !cpus.Has(cpu) {
		cpu = cpus.First()
	}
	return q.queueOn(cpu, w)
}

func (q *Workqueue) queueOn(cpu int, w *Work) bool {
	return q.queueResult("queue_work_on", w, q.queueOnErr(cpu, w, nil))
}

// queueOnErr is queueOn without the report: nil when it queued w,
// errPending when w was pending, otherwise the refusal (goapi.go). A
// non-nil plug holds the wake-up (QueueBatch).
func (q *Workqueue) queueOnErr(cpu int, w *Work, plug *wakePlug) error {
	if w == nil || w.fn == nil {
		return ErrNoFunc
	}
	if q.destroyed.Load() {
		return ErrDestroyed
	}
	if err := w.pend(); err != nil {
		return err
	}
	return q.queuePendedErr(cpu, w, false, plug)
}

// queuePended queues an item whose PENDING the caller owns
// (__queue_work). It returns false, clearing PENDING, if the queue refuses
// it (destroyed, or draining and not chained), and reports the refusal.
func (q *Workqueue) queuePended(reqCPU int, w *Work) bool {
	return q.queuePendedFrom(reqCPU, w, false)
}

// queuePendedFrom is queuePended; fromTimer marks an item whose timer
// fired, which a draining (not destroyed) queue accepts: it was queued
// before the drain began.
func (q *Workqueue) queuePendedFrom(reqCPU int, w *Work, fromTimer bool) bool {
	return q.queueResult("queue_work_on", w, q.queuePendedErr(reqCPU, w, fromTimer, nil))
}

// queuePendedErr is queuePendedFrom without the report: nil when it
// queued w, otherwise the refusal, with w's PENDING released and the
// instance cancelled. Every refusal of the queue path is returned from
// here, never reported here: the bool calls report it (queueResult), the
// error calls (QueueErr, Go, ...) return it. Reporting after the return
// also means w is released before the error handler runs: a handler that
// panics or calls runtime.Goexit must not leave w pending. A non-nil plug
// holds the pool's wake-up instead of waking at unlock (QueueBatch,
// batch.go).
func (q *Workqueue) queuePendedErr(reqCPU int, w *Work, fromTimer bool, plug *wakePlug) error {
	stamp := stagesOn() // stage timestamps (stages.go)
	if stamp {
		w.stampQueue()
	}
	if q.destroyed.Load() {
		w.markCancelled()
		w.release()
		return ErrDestroyed
	}
	if q.draining.Load() != 0 && !fromTimer && !q.isChained() {
		w.markCancelled()
		w.release()
		if q.destroyed.Load() {
			return ErrDestroyed
		}
		if q.dying.Load() {
			return errDestroying
		}
		return ErrDraining
	}
	if !fromTimer {
		if err := q.refuseElsewhere(w); err != nil {
			return err // one instance at a time (instances.go)
		}
	}
	if err := q.admit(w, fromTimer); err != nil { // MaxPending (backpressure.go)
		w.markCancelled()
		w.release()
		return err
	}
	traced := false
	for {
		pq, cpu := q.pickPwq(reqCPU, w)
		if pq == nil {
			// Destroy finished after the checks above.
			w.markCancelled()
			w.release()
			return ErrDestroyed
		}
		if tr := tracer.Load(); tr != nil && !traced {
			traced = true
			target := cpu
			if pq.pool.key.cpu < 0 {
				target = -1
			}
			// The item is in transit while the tracer runs: a grab from the
			// tracer itself (on this locked thread) must not wait for it. A
			// tracer that calls runtime.Goexit: the item, not yet linked, is
			// released (idle) before the caller's goroutine ends; the item of
			// a Group or Future is ended with ErrCancelled (cancelGoItem),
			// since nobody is left to return the refusal to.
			runtime.LockOSThread()
			tid := sched.Gettid()
			w.transit.Store(int32(tid))
			emit(tr, &wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: tid, Work: w.addr(), Function: w.Func(), Workqueue: q.name, ReqCPU: reqCPU, TargetCPU: target},
				func() {
					w.transit.Store(0)
					runtime.UnlockOSThread()
					w.markCancelled()
					w.release()
					cancelGoItem(w)
				})
			w.transit.Store(0)
			runtime.UnlockOSThread()
		}
		if q.tryPush(reqCPU, pq, w) {
			return nil // a worker between items takes it (incoming.go)
		}
		// Locked path; also for an item that tryPush bounced (its pwq
		// died), which finds the pwq dead below and retries.
		p := pq.pool
		p.mu.Lock()
		if pq.dead {
			// Retired by an attribute change after we read the table (the
			// current table has a live pwq), or marked by Destroy.
			p.mu.Unlock()
			if q.destroyed.Load() {
				w.markCancelled()
				w.release()
				return ErrDestroyed
			}
			runtime.Gosched()
			continue
		}
		if p.key.cpu < 0 {
			// For the spin rule and the wake_cpu hint (pool.kick): worth
			// an instruction, not a system call (-1: unknown, no hint).
			if reqCPU == cpuUnbound || cpu < 0 || cpu >= cpuUnbound {
				var ok bool
				if cpu, ok = sched.CheapCPU(); !ok {
					cpu = -1
				}
			}
			p.lastQueueCPU = cpu
		}
		if stamp {
			w.stampLocked()
		}
		scan := pq.insert(w)
		p.mu.unlockPlugged(plug)
		if scan {
			pq.lim.scan(nil)
		}
		return nil
	}
}

// pickPwq chooses the pwq for an item queued on reqCPU (cpuUnbound: the
// caller's CPU). It returns the pwq and the CPU it stands for; nil once
// the queue is destroyed.
func (q *Workqueue) pickPwq(reqCPU int, w *Work) (*pwq, int) {
	t := q.table.Load()
	if len(t.cpu) == 0 {
		return nil, reqCPU // destroyed: the table is empty
	}
	cpu := reqCPU
	var pq *pwq
	if (cpu == cpuUnbound || cpu >= len(t.cpu)) && q.unbound && len(t.pods) <= 1 {
		// One pod: every CPU maps to the same pwq, no need to ask getcpu.
		pq = t.dfl
	} else {
		if cpu == cpuUnbound || cpu >= len(t.cpu) {
			cpu = currentCPU()
			if cpu >= len(t.cpu) {
				cpu = 0
			}
		}
		pq = t.cpu[cpu]
	}
	// Non-reentrance: if the item still runs on a pool of this queue, queue
	// it there so that it runs after, not beside, itself. Ordered queues
	// always queue on the newest pwq, which keeps queue order across
	// attribute changes; their max_active of 1, shared by all their pwqs,
	// keeps them non-reentrant.
	if r := w.runner.Load(); r != nil && !q.ordered {
		if rp := r.curPwq.Load(); rp != nil && rp.wq == q {
			pq = rp
		}
	}
	return pq, cpu
}

func (q *Workqueue) reportDestroyed(w *Work) {
	if q.reported.CompareAndSwap(false, true) {
		q.reportError("queue_work_on", w.Func(), fmt.Errorf("%w: %s", ErrDestroyed, q.name))
	}
}

// isChained reports whether the caller is a worker (or the rescuer)
// executing an item of q (is_chained_work). Costs a gettid and a map
// lookup; exact, since a worker's tid is registered only while its thread
// lives.
func (q *Workqueue) isChained() bool {
	wk := selfWorker()
	if wk == nil {
		return false
	}
	pq := wk.curPwq.Load()
	return pq != nil && pq.wq == q
}

// QueueDelayed queues dw after d (d <= 0 queues at once). It returns false
// if dw was already pending or is disabled. For a per-CPU queue the item
// runs on the CPU the caller was on; for an unbound queue on any CPU, like
// the kernel since seed 004's fix. Never blocks. Mirrors
// queue_delayed_work().
func (q *Workqueue) QueueDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.queueDelayedOn(cpuUnbound, dw, d)
}

// QueueDelayedOn is QueueDelayed on CPU cpu. Mirrors
// queue_delayed_work_on().
func (q *Workqueue) QueueDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil {
		return q.queueDelayedOn(cpu, dw, d) // reports ErrNoFunc
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if cpu < 0 || cpu >= len(q.table.Load().cpu) {
		q.reportError("queue_delayed_work_on", dw.Func(), fmt.Errorf("%w: %d", ErrInvalidCPU, cpu))
		return false
	}
	return q.queueDelayedOn(cpu, dw, d)
}

func (q *Workqueue) queueDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil || dw.fn == nil || !dw.timer.Ready() {
		q.reportError("queue_delayed_work_on", "", ErrNoFunc)
		return false
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if !dw.tryPend() {
		return false
	}
	return dw.arm(q, cpu, d)
}

// ModDelayed changes dw's delay to d, queueing it if it was idle. It
// returns false if dw was idle (and is now queued), true if it was pending
// (and its timer was modified). A disabled item is not queued. While a
// CancelSync or DisableSync holds dw it returns true and queues nothing
// (the canceller wins), also from inside dw's own function. Never blocks
// beyond the few instructions an item is in transit. Mirrors
// mod_delayed_work().
func (q *Workqueue) ModDelayed(dw *DelayedWork, d time.Duration) bool {
	return q.modDelayedOn(cpuUnbound, dw, d)
}

// ModDelayedOn is ModDelayed on CPU cpu. Mirrors mod_delayed_work_on().
func (q *Workqueue) ModDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil {
		return q.modDelayedOn(cpu, dw, d) // reports ErrNoFunc
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if cpu < 0 || cpu >= len(q.table.Load().cpu) {
		q.reportError("mod_delayed_work_on", dw.Func(), fmt.Errorf("%w: %d", ErrInvalidCPU, cpu))
		return false
	}
	return q.modDelayedOn(cpu, dw, d)
}

func (q *Workqueue) modDelayedOn(cpu int, dw *DelayedWork, d time.Duration) bool {
	if dw == nil || dw.fn == nil || !dw.timer.Ready() {
		q.reportError("mod_delayed_work_on", "", ErrNoFunc)
		return false
	}
	if q.destroyed.Load() {
		q.reportDestroyed(&dw.Work)
		return false
	}
	if dw.runsElsewhere(q) {
		q.reportOtherQueue("mod_delayed_work_on", &dw.Work)
		return false // one instance at a time (instances.go)
	}
	r := dw.grab()
	switch r {
	case grabHeld:
		return true
	case grabSelf:
		q.reportError("mod_delayed_work_on", dw.Func(), ErrDeadlock)
		return false
	}
	was := r == grabPending
	if !was {
		if err := q.refuseElsewhere(&dw.Work); err != nil {
			q.reportError("mod_delayed_work_on", dw.Func(), err)
			return false // started on another queue since the check above
		}
	}
	if was {
		// The instance goes on, re-armed, outside every key (as grab
		// does for a chained one): if it was its key's active instance,
		// the key moves on now instead of waiting for the timer.
		dw.keyedDone(seqOf(dw.state.Load()), true)
	}
	if dw.Disabled() {
		dw.markCancelled()
		dw.release()
		return was
	}
	if was && d <= 0 {
		// A pending instance queued again at once is not a new one:
		// MaxPending does not refuse it.
		_ = q.admit(&dw.Work, true)
	}
	dw.arm(q, cpu, d)
	return was
}

// Flush waits until every item queued before the call has finished
// (items queued later are not waited for), keyed items waiting in their
// key's chain included. It blocks as long as that
// takes; see FlushContext. Called from one of q's own items it would wait
// for itself: it returns at once and reports ErrDeadlock to the error
// handler. Mirrors flush_workqueue().
func (q *Workqueue) Flush() { _ = q.FlushContext(context.Background()) }

// FlushContext is Flush bounded by ctx: nil once flushed, ctx.Err() if ctx
// ends first (the items keep running), ErrDeadlock from one of q's own
// items.
func (q *Workqueue) FlushContext(ctx context.Context) error {
	if q.isChained() {
		// An item waiting for its own color to drain would wait forever.
		q.reportError("flush_workqueue", q.name, ErrDeadlock)
		return ErrDeadlock
	}
	q.flushMu.Lock()
	defer q.flushMu.Unlock()
	// A flush abandoned by its context still owns the other color: wait for
	// it to drain before flipping again.
	if prev := q.flushAbandoned; prev != nil {
		select {
		case <-prev:
			q.flushAbandoned = nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	kt := q.keyed.Load()
	nKeyed := 0
	if kt != nil {
		nKeyed = keyShards
	}
	done := make(chan struct{})
	q.flushDone = done
	q.flushLeft.Store(int32(len(pwqs)+nKeyed) + 1)
	for _, pq := range pwqs {
		p := pq.pool
		p.mu.Lock()
		old := pq.color
		pq.color ^= 1
		if pq.nrInFlight[old] == 0 {
			p.mu.Unlock()
			q.flushPwqDone()
			continue
		}
		pq.flushWaiting = true
		p.mu.Unlock()
	}
	// Keyed items still waiting in their key's chain are not on any pwq
	// yet: each key-table shard has flush colors of its own.
	for i := 0; i < nKeyed; i++ {
		if !kt.shards[i].flip() {
			q.flushPwqDone()
		}
	}
	q.flushPwqDone()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		q.flushAbandoned = done
		return ctx.Err()
	}
}

func (q *Workqueue) flushPwqDone() {
	if q.flushLeft.Add(-1) == 0 {
		close(q.flushDone)
	}
}

// inFlight returns the number of items queued, inactive or running.
func (q *Workqueue) inFlight() int {
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	n := 0
	for _, pq := range pwqs {
		pq.pool.mu.Lock()
		n += pq.nrInFlight[0] + pq.nrInFlight[1]
		pq.pool.mu.Unlock()
	}
	return n
}

// Drain waits until the queue is empty, flushing repeatedly; keyed items
// waiting in their key's chain (QueueKeyed) count as queued. While it
// drains only items running on the queue may queue onto it (chained work);
// other queue attempts return false and report ErrDraining. Mirrors
// drain_workqueue().
func (q *Workqueue) Drain() { _ = q.DrainContext(context.Background()) }

// DrainContext is Drain bounded by ctx: nil once the queue is empty,
// ErrDeadlock from one of q's own items, and ctx.Err() when ctx ends
// first. In that case the drain goes on in the background (on a goroutine
// of its own) and the queue stays in draining mode until it completes:
// meanwhile queue calls from outside q's own items keep returning false
// with ErrDraining (reported once per drain), exactly as during the wait.
// A later Drain, DrainContext or Destroy waits for the queue to be empty
// as usual. So a deadline bounds the caller's wait, never what the queue
// accepts.
func (q *Workqueue) DrainContext(ctx context.Context) error {
	if q.isChained() {
		q.reportError("drain_workqueue", q.name, ErrDeadlock)
		return ErrDeadlock
	}
	q.drainReported.Store(false)
	q.draining.Add(1)
	q.wakeRoom() // QueueContext waiters see ErrDraining
	if err := q.drainLoop(ctx); err != nil {
		// The queue keeps refusing until the drain completes: one that
		// gave up would accept work it never drained (drainOn).
		go q.drainOn()
		return err
	}
	q.draining.Add(-1)
	return nil
}

// reportDraining reports a queue attempt refused because the queue
// drains: the first of each drain, as the kernel's WARN_ON_ONCE would
// (the later ones return false just the same).
func (q *Workqueue) reportDraining(op string, w *Work) {
	if q.drainReported.CompareAndSwap(false, true) {
		q.reportError(op, w.Func(), fmt.Errorf("%w: %s (reported once per drain; later refusals are not reported)", ErrDraining, q.name))
	}
}

func (q *Workqueue) drainLoop(ctx context.Context) error {
	for {
		if err := q.FlushContext(ctx); err != nil {
			return err
		}
		if q.inFlight() == 0 && q.keyedN.Load() == 0 {
			return nil
		}
	}
}

// Destroy drains the queue, including work that its items queue onto it
// while it drains and keyed items waiting in their key's chain (QueueKeyed),
// then releases its pools and threads. Delayed items whose
// timer is still armed on the queue are cancelled, not waited for (the
// kernel requires them cancelled before destroy_workqueue): they are left
// idle, so another queue can take them, and reported to the error handler
// as ErrDelayedPending naming them, as kthread's Destroy does. From the
// start of Destroy, arming a delayed item on the queue is refused. After
// Destroy returns no item of the queue is pending or running, Queue
// returns false and reports ErrDestroyed once, and attribute writes return
// ErrDestroyed. While it drains, queue calls from outside the queue's own
// items are refused: Queue reports ErrDraining, and QueueErr, Go and the
// other error calls return an error matching both ErrDestroyed and
// ErrDraining. Calling Destroy from one of the queue's own items would
// deadlock: it reports ErrDeadlock and returns without destroying. A second
// Destroy waits for the first. It blocks until the queue is drained.
// See DestroyContext to bound the wait. Mirrors destroy_workqueue().
func (q *Workqueue) Destroy() { _ = q.DestroyContext(context.Background()) }

// destroyRest is Destroy after destroyBegin (shutdown.go): it cancels the
// armed items, drains the queue and releases its pools. It runs once, on
// the first destroyer's goroutine (DestroyContext with a deadline: on a
// goroutine of its own).
func (q *Workqueue) destroyRest() {
	cancelled := q.closeTimers()
	for {
		_ = q.drainLoop(context.Background())
		// A queue call that passed the draining check just before it was
		// set may still be on its way to a pwq. Mark every pwq dead while
		// it is empty; such a call then finds it dead and is refused. If
		// one got in first, its item must run: unmark and drain again.
		if q.markDead() {
			break
		}
	}
	q.destroyed.Store(true)
	q.wakeRoom() // QueueContext waiters see ErrDestroyed
	unregisterQueue(q)
	if q.rescuer != nil {
		q.rescuer.stop()
	}
	if r := q.escaper.Load(); r != nil {
		r.stop()
		recomputeEscMin()
	}
	q.mu.Lock()
	pwqs := q.allPwqs
	q.allPwqs = nil
	for _, pq := range pwqs {
		q.retired.addFrom(&pq.stats) // Stats stay readable after Destroy
		pq.lim.removePwq(pq)
	}
	q.table.Store(&pwqTable{cpu: q.table.Load().cpu[:0:0]})
	q.mu.Unlock()
	seen := map[*pool]int{}
	for _, pq := range pwqs {
		seen[pq.pool]++
	}
	for p, n := range seen {
		for range n {
			p.put()
		}
	}
	if len(cancelled) > 0 {
		q.reportError("destroy_workqueue", q.name, fmt.Errorf("%w: %s: %d armed item(s) cancelled: %s",
			ErrDelayedPending, q.name, len(cancelled), strings.Join(cancelled, ", ")))
	}
}

// markDead marks every pwq of q dead if all of them are empty, and
// reports whether it did; otherwise it leaves them all alive.
func (q *Workqueue) markDead() bool {
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	for i, pq := range pwqs {
		p := pq.pool
		p.mu.Lock()
		empty := pq.markPwqDead(false)
		p.mu.Unlock()
		if !empty {
			for _, done := range pwqs[:i] {
				done.pool.mu.Lock()
				done.setDead(false)
				done.pool.mu.Unlock()
			}
			return false
		}
	}
	return true
}

// MaxActive returns the queue's max_active.
func (q *Workqueue) MaxActive() int { return int(q.maxActive.Load()) }

// SetMaxActive changes max_active; items waiting on the inactive list are
// activated at once if the new limit allows. Returns ErrInvalidArgument for
// n outside [1, 2048] (nothing changes), and for ordered queues, whose
// max_active is fixed at 1. Mirrors workqueue_set_max_active().
func (q *Workqueue) SetMaxActive(n int) error {
	return q.applyAttrs("max_active", func(a *Attrs) error {
		a.MaxActive = n
		return nil
	})
}

// Congested reports whether items wait on the inactive list of the pwq
// that serves cpu (cpu < 0 means the caller's CPU). Advisory; never blocks
// for long. Mirrors workqueue_congested().
func (q *Workqueue) Congested(cpu int) bool {
	t := q.table.Load()
	if cpu < 0 {
		cpu = currentCPU()
	}
	if cpu >= len(t.cpu) {
		return false
	}
	pq := t.cpu[cpu]
	pq.pool.mu.Lock()
	defer pq.pool.mu.Unlock()
	return !pq.inactive.empty()
}

func currentCPU() int { return sched.GetCPU() }

// nanotime returns CLOCK_MONOTONIC in ns, the clock of events and stats.
func nanotime() int64 { return time.Since(epoch).Nanoseconds() + epochMono }

// epoch pairs a time.Time (whose monotonic reading is read through the
// vDSO) with CLOCK_MONOTONIC, so nanotime costs one vDSO call.
var epochMono = sched.MonotonicNs()
var epoch = time.Now()
