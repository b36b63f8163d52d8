package wq

import (
	"fmt"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/report"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
	"github.com/gowq/wq/wqtrace"
)

// Process-wide settings: every exported setter and getter of a global,
// the kernel's workqueue module parameters and sysfs globals. What a
// setting drives stays with its concern (the watchdog in watchdog.go, the
// attribute table in attrs_table.go, the handlers in hooks.go); the
// settings that no other concern holds are kept here.

// The settings that no other concern holds, read with atomic loads.
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

// CacheShardSize returns the cache_shard_size global: the number of
// cores, each with its SMT siblings, that a cache_shard pod holds about
// (the kernel's workqueue.cache_shard_size). Never blocks.
func CacheShardSize() int { return int(cacheShardSize.Load()) }

// SetCacheShardSize sets the cache_shard_size global and rebuilds the
// pools of the unbound queues whose scope is cache_shard (also through
// "default"), as a topology change does: each last-level cache is split
// into round(cores / n) shards, at least one, of as even a number of
// cores as possible, siblings kept together (the kernel's
// WQ_AFFN_CACHE_SHARD; it takes the size only at boot, gowq at any
// time). It returns ErrInvalidArgument for n outside
// 1..topology.MaxCacheShardSize (4096), and for a size whose pods the
// workers of a live strict queue could not be pinned to (probed as by
// SetAffinityScope); nothing changes then. It blocks while the pools are
// rebuilt. Safe from any goroutine.
func SetCacheShardSize(n int) error {
	if n < 1 || n > topology.MaxCacheShardSize {
		return fmt.Errorf("%w: cache_shard_size %d (want 1..%d)", ErrInvalidArgument, n, topology.MaxCacheShardSize)
	}
	attrMu.Lock()
	defer attrMu.Unlock()
	if n == CacheShardSize() {
		return nil
	}
	nt, err := currentTopology().WithCacheShardSize(n)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if err := checkQueues(liveQueues(), nt, unboundMask.Load(), nil); err != nil {
		return fmt.Errorf("cache_shard_size %d: %w", n, err)
	}
	cacheShardSize.Store(int32(n))
	// Every snapshot read from now on carries the new pods; take one now,
	// so that the pools are rebuilt before this returns. If the topology
	// cannot be read, the next successful rescan applies the size.
	_ = Rescan()
	return nil
}

// SetUnboundCPUMask restricts every unbound queue to cpus (the kernel's
// workqueue/cpumask, wq_unbound_cpumask); nil or empty restores all CPUs.
// A queue with its own cpumask uses the CPUs of both masks, or the global
// mask alone when they have none in common, as the kernel's
// apply_wqattrs_prepare does; the live queues are re-applied at once. A
// mask with no online CPU returns ErrInvalidArgument, and so does one that
// the workers of a live unbound queue could not be pinned to (each queue's
// pools are probed as by SetCPUMask), and so does a CPU id outside
// 0..65535; nothing changes then.
func SetUnboundCPUMask(cpus []int) error {
	attrMu.Lock()
	defer attrMu.Unlock()
	for _, c := range cpus {
		if c < 0 || c >= topology.MaxCPUs {
			return fmt.Errorf("%w: unbound cpumask: CPU %d outside [0, %d]", ErrInvalidArgument, c, topology.MaxCPUs-1)
		}
	}
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
	// Listed again after the store: a queue that Alloc registers from now
	// on sees the new mask itself (see alloc), and one registered before
	// is in this list.
	for _, q := range liveQueues() {
		if q.unbound {
			q.reinstall(currentTopology())
		}
	}
	return nil
}

// GlobalAttrNames returns the names of the process-wide attributes.
func GlobalAttrNames() []string {
	out := make([]string, len(globalAttrTable))
	for i, e := range globalAttrTable {
		out[i] = e.name
	}
	return out
}

// GlobalAttr reads a process-wide attribute: default_affinity_scope,
// cpu_intensive_thresh_us (us), watchdog_thresh (s), cpumask (the unbound
// cpumask, hex), highpri_policy ("highpri" or "fifo"), rt_priority,
// power_efficient ("Y"/"N"). Unknown names: ErrInvalidArgument.
func GlobalAttr(name string) (string, error) {
	e := lookupGlobalAttr(name)
	if e == nil {
		return "", fmt.Errorf("%w: no global attribute %q", ErrInvalidArgument, name)
	}
	return e.get(), nil
}

// SetGlobalAttr writes a process-wide attribute (see GlobalAttr). Numbers
// are decimal and range-checked: cpu_intensive_thresh_us and
// watchdog_thresh from 0 to what a time.Duration holds in their unit
// (about 292 years), rt_priority 1..99. A value that does not parse or is
// out of range returns ErrInvalidArgument and changes nothing; values the
// process cannot apply are refused as by the typed setters
// (SetUnboundCPUMask, SetDefaultAffinityScope, SetHighPriPolicy,
// SetRTPriority), with ErrPermission or ErrInvalidArgument, and change
// nothing. Safe from any goroutine.
func SetGlobalAttr(name, value string) error {
	e := lookupGlobalAttr(name)
	if e == nil {
		return fmt.Errorf("%w: no global attribute %q", ErrInvalidArgument, name)
	}
	return e.set(value)
}

// SetPanicHandler sets the process-wide function called (on the worker
// thread) when a work function panics; nil restores the default, which
// logs the function name, the value and the stack with log/slog at error
// level. A queue allocated with WithPanicHandler calls its own handler
// instead. The worker keeps serving, flush waiters are released and the
// item counts as completed. Safe from any goroutine.
func SetPanicHandler(h func(PanicInfo)) { handlers.SetPanic(h) }

// SetErrorHandler sets the process-wide function called when an
// operation that returns only a bool (as the kernel's do) hits a usage
// error: queueing on a destroyed queue (ErrDestroyed), a nil function
// (ErrNoFunc), a wait that would deadlock (ErrDeadlock), a bad CPU
// (ErrInvalidCPU). op names the kernel function ("queue_work_on"), fn the
// work function. nil restores the default, which logs with log/slog at
// warning level. Errors of operations on a queue allocated with
// WithErrorHandler (queueing on it, flushing, draining or destroying it)
// go to that queue's handler instead; errors of operations on an item
// alone (Work.Flush, Cancel, Disable, Enable) and of pools shared by
// several queues (worker creation) come here. The handler runs on the
// goroutine that made the call (a Queue refusal: the queuer's), or on a
// worker for errors found there; a panic in it is recovered and logged,
// but a runtime.Goexit in it ends that goroutine, as it would anywhere
// (the refused item is released first). Safe from any goroutine; the
// handler must not block.
func SetErrorHandler(h func(op, fn string, err error)) { handlers.SetError(h) }

// SetTracer installs t to receive the four workqueue events (queue_work,
// activate_work, execute_start, execute_end) synchronously on the thread
// where they happen; nil removes it. Like a kernel tracepoint handler, t
// runs in the middle of gowq's bookkeeping: activate_work is delivered
// with the pool lock held, so from that event t must not queue, cancel or
// flush work (it would deadlock); Stats is safe from any event. A panic in
// t is recovered and logged; runtime.Goexit in t leaves every item in a
// consistent state (an item being queued stays idle). With no tracer the cost on the queue
// path is one atomic load and a well-predicted branch. While a tracer is
// set, queue calls always take the pool lock (the lock-free path of
// docs/design.md, "The wake path" 6, is off, and Stats().Pushed stays
// still), so that activate_work is delivered by the queuer: tracing
// changes the path it traces. Safe from any goroutine.
func SetTracer(t wqtrace.Tracer) {
	if t == nil {
		tracer.Store(nil)
		return
	}
	tracer.Store(&t)
}

// SetLogger sets the process-wide logger of gowq (wq and kthread): the
// default panic and error handlers, the watchdog and every other message
// gowq logs go there, unless a queue has its own (WithLogger). nil (the
// default) means slog.Default() at the time of each message. Safe from any
// goroutine; takes effect for the next message.
func SetLogger(l *slog.Logger) { report.SetLogger(l) }

// SetRTHogThresh sets how long an item on an RT pool (SCHED_FIFO workers)
// may run without sleeping before the watchdog reports it: such an item
// starves every ordinary thread on its CPU. Default 100 ms; 0 turns the
// check off. The report goes to slog and to the lockup hook, once per item.
// Negative: ErrInvalidArgument.
func SetRTHogThresh(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: RT hog threshold %v", ErrInvalidArgument, d)
	}
	wdog.rtThresh.Store(int64(d))
	return nil
}

// SetWatchdogThresh sets how long a pool may hold pending work without
// progress before the lockup report; 0 turns the watchdog off. Default 30 s.
// Mirrors workqueue.watchdog_thresh. Negative: ErrInvalidArgument.
func SetWatchdogThresh(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: watchdog_thresh %v", ErrInvalidArgument, d)
	}
	wdog.thresh.Store(int64(d))
	return nil
}

// WatchdogThresh returns the current watchdog threshold (0 = off).
func WatchdogThresh() time.Duration { return time.Duration(wdog.thresh.Load()) }

// SetLockupHook sets a function called with each lockup report (on the
// watchdog goroutine), in addition to the slog error; it may panic or
// alert. nil removes it.
func SetLockupHook(h func(LockupReport)) {
	if h == nil {
		wdog.hook.Store(nil)
		return
	}
	wdog.hook.Store(&h)
}
