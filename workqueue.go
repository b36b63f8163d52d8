package wq

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

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
	// Fields are tagged with pool.go's lock key (I: set at Alloc, Q: mu
	// held, A: atomic, T: timerMu held, F: flushMu held, D: destroyMu
	// held, S: synchronises itself).
	name    string // I
	flags   Flags  // I
	unbound bool   // I
	ordered bool   // I
	threads bool   // I: Threads option (gopool.go)

	mu        sync.Mutex               // S: serialises attribute changes and Destroy
	table     atomic.Pointer[pwqTable] // A: current CPU -> pwq mapping; replaced under mu
	allPwqs   []*pwq                   // Q, and written under statsMu too: every pwq installed and not released (flush, drain, stats)
	lims      []*activeLimit           // Q, and appended under statsMu too: per CPU (per-CPU) or per node (unbound)
	maxActive atomic.Int32             // A: written under mu
	attrs     queueAttrs               // Q
	rescuer   *rescuer                 // I
	// statsMu is below the pool locks (pool.go's lock key): Stats takes
	// it, and under it the key shards' locks, and nothing else, so that it is safe from a
	// tracer under a pool lock. It makes the release of a pwq (its
	// counters folded into retired, it leaves allPwqs) one step for
	// Stats, so that no counter is seen twice or, for a moment, not at all.
	statsMu        sync.Mutex
	retired        pwqStats                       // A, folded into under statsMu: counters of released pwqs
	statsPolicy    Policy                         // Q and statsMu (written under both): attrs.policy, for Stats
	goneErrs       map[*pool]goneErr              // statsMu: failed creations of pools the queue no longer uses
	fellBack       bool                           // I: got a lower class than asked
	fallbackReason string                         // I: why fellBack (the first blocker)
	panicHandler   func(PanicInfo)                // I: WithPanicHandler, nil for the process-wide one
	bp             backpressure                   // S: MaxPending and QueueContext's waiters (backpressure.go)
	logger         *slog.Logger                   // I: WithLogger, nil for the process-wide one
	errorHandler   func(op, fn string, err error) // I: WithErrorHandler, nil for the process-wide one

	// A: lock-free queue calls (incoming.go) and, of them, those bounced
	// back to the locked path: per queue, not per pwq, as the pwq of a
	// bounced push was retired, its counters already folded into retired.
	pushed, bounced atomic.Int64

	// Armed delayed items (Destroy cancels them). timerMu is a leaf lock,
	// taken after Work.mu.
	timerMu        sync.Mutex    // S
	armed          timerList     // T
	timersClosed   bool          // T: Destroy began; arming is refused
	firing         int           // T: armed instances taken off armed and not yet queued (timerFn, DelayedWork.Flush, ModDelayed)
	timerIdle      chan struct{} // T: closed when firing drops to 0
	timerCancelled []string      // T: items cancelled by closeTimers

	frozen atomic.Bool // A: FreezeAll: new activeLimits start frozen
	// A: the lifecycle word (admit.go): live, draining(n), destroying,
	// destroyed, and the once-only report bits. Destroy sets destroying
	// with mu held too, so that an attribute change, which installs pwqs
	// under mu, sees it.
	life        lifeState
	destroyMu   sync.Mutex    // S: serialises destroyBegin (lifecycle.go)
	destroyDone chan struct{} // D: closed when the destroy that began has finished (lifecycle.go)

	flushMu        sync.Mutex    // S: serialises flushers
	flushLeft      atomic.Int32  // A: pwqs the current flush still waits for
	flushDone      chan struct{} // F: closed when flushLeft reaches 0
	flushAbandoned chan struct{} // F: done channel of a flush whose context ended

	keyed  atomic.Pointer[keyTable] // A: per-key ordering (keyed.go), created by the first QueueKeyed
	keyedN atomic.Int64             // A: keyed instances in flight (chained, queued or running)
	// Adaptive placement (escape.go).
	escaper     atomic.Pointer[rescuer] // A: per-CPU queues with escape_after: set once, under mu
	escapeAfter atomic.Int64            // A: ns; 0: items never escape
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

// MaxActive returns the queue's max_active.
func (q *Workqueue) MaxActive() int { return int(q.maxActive.Load()) }

// SetMaxActive changes max_active; items waiting on the inactive list are
// activated at once if the new limit allows. Returns ErrInvalidArgument for
// n outside [1, 2048] (nothing changes), and for ordered queues, whose
// max_active is fixed at 1. QueueContext calls waiting for room look
// again. Mirrors workqueue_set_max_active().
func (q *Workqueue) SetMaxActive(n int) error {
	if q == nil {
		return errNilQueue
	}
	err := q.applyAttrs("max_active", func(a *Attrs) error {
		a.MaxActive = n
		return nil
	})
	q.wakeRoom() // the room for waiters may follow max_active
	return err
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

// nanotime returns CLOCK_MONOTONIC in ns, the clock of events and stats:
// the runtime's own clock (one vDSO call, about 20 ns; time.Since costs
// twice that).
func nanotime() int64 { return sched.Nanotime() }
