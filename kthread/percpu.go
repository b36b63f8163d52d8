package kthread

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// PerCPU is a set of workers, one bound to each online CPU, with a
// workqueue to fall back on when a CPU has none: the per-CPU
// kthread_worker pool of EROFS (fs/erofs/zdata.c, CONFIG_EROFS_FS_PCPU_KTHREAD), z_erofs_pcpu_workers. It follows CPU
// hotplug. All methods are safe from any goroutine.
//
// The CPU -> worker table is an immutable slice published through an
// atomic pointer and replaced whole on every change (EROFS's
// RCU-protected array): Queue reads it with one atomic load and takes no set-wide lock.
// A queue that races with the retirement of its CPU's worker is refused by
// that worker and goes to the fallback workqueue, so no grace period is
// needed and nothing is lost.
type PerCPU struct {
	name     string
	opts     []Option
	fallback Fallback // immutable
	fbOwner  *Worker  // owner of items queued on fallback; no thread

	workers atomic.Pointer[[]*Worker] // atomic: immutable table indexed by CPU, nil entries for CPUs without a worker

	mu        sync.Mutex     // serialises table changes (apply) and Destroy
	destroyed atomic.Bool    // written under mu
	retiring  sync.WaitGroup // Add under mu: workers being destroyed after their CPU left
	cancelSub func()         // unsubscribes from the fallback's OnCPUChange
	reported  atomic.Bool    // ErrDestroyed reported once
	done      chan struct{}  // closed when Destroy has finished
}

// Fallback is where a PerCPU set runs the items of CPUs that have no
// worker, and what tells it which CPUs are online. Package
// kthread/wqfallback provides the one gowq uses, a wq workqueue with wq's
// CPU hotplug notifications (wqfallback.Queue); package kthread itself
// does not depend on wq. A set calls Open once from NewPerCPU and Close
// once from Destroy (or from a NewPerCPU that fails after Open); the
// other methods may be called from any goroutine.
type Fallback interface {
	// Open prepares the fallback for the set named name (for example
	// allocates its workqueue). An error fails NewPerCPU.
	Open(name string) error
	// Close releases what Open allocated; it is called after every item
	// the set queued on workers has run.
	Close()
	// Name names the fallback in reports.
	Name() string
	// NewItem returns the state one Work needs on the fallback. It is
	// called the first time a Work goes to a fallback, with a lock held:
	// it must not block.
	NewItem() FallbackItem
	// Queue queues it (which came from NewItem and is not pending) and
	// returns false when the fallback refuses it (destroyed). It must not
	// block.
	Queue(it FallbackItem) bool
	// OnlineCPUs returns the online CPUs, in increasing order.
	OnlineCPUs() []int
	// OnCPUChange calls fn with the online CPUs after every change, until
	// cancel is called.
	OnCPUChange(fn func(online []int)) (cancel func())
}

// FallbackCloser is an optional interface of a Fallback. CloseWouldWait
// reports whether Close, called by the calling goroutine, would wait for
// that goroutine itself: the caller runs one of the fallback's items and
// Close destroys the workqueue it runs on. PerCPU.Destroy then returns
// ErrDeadlock and changes nothing. A Fallback without it is taken never
// to wait for its caller. wqfallback's implements it.
type FallbackCloser interface {
	CloseWouldWait() bool
}

// FallbackItem is a Work as a Fallback sees it (a wq.Work for
// wqfallback). Init sets its function; Pending, Flush and CancelSync are
// those of wq.Work; Idle reports that it is neither pending, nor running,
// nor held by a CancelSync (wq.Work.Busy() == 0). An item keeps its
// FallbackItem for life, across sets: every Fallback a Work goes to must
// accept the items of the others (all wqfallback ones do).
type FallbackItem interface {
	Init(fn func())
	Pending() bool
	Idle() bool
	Flush() bool
	CancelSync() bool
}

// NewPerCPU creates a worker named name/<cpu> on every online CPU (see
// CreateWorkerOnCPU; opts apply to each, e.g. WithFIFOLow for EROFS's
// CONFIG_EROFS_FS_PCPU_KTHREAD_HIPRI variant) and subscribes to CPU hotplug (fallback.OnCPUChange).
// Items for a CPU without a worker go to fallback:
// wqfallback.Queue(nil) allocates the set's own UNBOUND|HIGHPRI
// workqueue with max_active = the number of online CPUs, as EROFS
// does, and destroys it in Destroy; wqfallback.Queue(q) uses q and leaves
// it to its owner. It blocks while the threads are created. Errors:
// ErrInvalidArgument (an empty name, a bad option, a nil fallback),
// ErrPermission (for the class of the workers, or from fallback.Open, for
// example for the HIGHPRI fallback without CAP_SYS_NICE: pass a
// workqueue of your own then), or the first worker creation error;
// nothing is left running on error. Mirrors erofs_init_percpu_workers() +
// erofs_cpu_hotplug_init().
func NewPerCPU(name string, fallback Fallback, opts ...Option) (*PerCPU, error) {
	if name == "" {
		return nil, fmt.Errorf("kthread: new per-CPU set: %w: empty name", ErrInvalidArgument)
	}
	o, err := parseOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("kthread: new per-CPU set %q: %w", name, err)
	}
	if fallback == nil {
		return nil, fmt.Errorf("kthread: new per-CPU set %q: %w: nil fallback (see package kthread/wqfallback)", name, ErrInvalidArgument)
	}
	if err := checkPrivilege(o.attr); err != nil {
		return nil, fmt.Errorf("kthread: new per-CPU set %q: %w", name, err)
	}
	s := &PerCPU{name: name, opts: slices.Clone(opts), done: make(chan struct{})}
	if err := fallback.Open(name); err != nil {
		return nil, fmt.Errorf("kthread: new per-CPU set %q: fallback workqueue: %w", name, err)
	}
	s.fallback = fallback
	s.fbOwner = &Worker{name: fallback.Name(), cpu: -1, set: s, fallback: &fallbackQueue{f: fallback}}
	s.workers.Store(&[]*Worker{})
	// Subscribe first, then read the online CPUs under mu: a change that
	// happens in between is applied again by the subscriber, so none is
	// missed.
	s.cancelSub = fallback.OnCPUChange(s.apply)
	s.mu.Lock()
	err, _ = s.applyLocked(fallback.OnlineCPUs(), true)
	s.mu.Unlock()
	if err != nil {
		_ = s.Destroy()
		return nil, fmt.Errorf("kthread: new per-CPU set %q: %w", name, err)
	}
	return s, nil
}

// apply is the hotplug subscriber: it makes the table match online.
func (s *PerCPU) apply(online []int) {
	s.mu.Lock()
	_, errs := s.applyLocked(online, false)
	s.mu.Unlock()
	// Reported after unlocking: the error handler may call into the set.
	for _, err := range errs {
		reportError("kthread_create_worker_on_cpu", s.name, err)
	}
}

// applyLocked creates workers for CPUs in online that have none and
// retires the workers of CPUs no longer in it: the new table is published
// first, then each retired worker is destroyed on a goroutine of its own
// after its queued items have run (erofs_cpu_offline's synchronize_rcu +
// kthread_destroy_worker; the wq subscriber must not block). With strict,
// the first creation error is returned; otherwise creation errors are
// returned for the caller to report once mu is unlocked, and the CPU
// stays without a worker (its items go to the fallback). Called with mu
// held.
func (s *PerCPU) applyLocked(online []int, strict bool) (first error, errs []error) {
	if s.destroyed.Load() {
		return nil, nil
	}
	old := *s.workers.Load()
	n := len(old)
	for _, c := range online {
		n = max(n, c+1)
	}
	tbl := make([]*Worker, n)
	in := make([]bool, n)
	var firstErr error
	for _, c := range online {
		if c < 0 {
			continue
		}
		in[c] = true
		if c < len(old) && old[c] != nil {
			tbl[c] = old[c]
			continue
		}
		wk, err := create(c, s.name+"/"+fmt.Sprint(c), s, s.opts)
		if err != nil {
			if strict {
				firstErr = err
				break
			}
			errs = append(errs, err)
			continue
		}
		tbl[c] = wk
	}
	var retire []*Worker
	for c, wk := range old {
		if wk != nil && !in[c] {
			retire = append(retire, wk)
		}
	}
	s.workers.Store(&tbl)
	for _, wk := range retire {
		s.retiring.Add(1)
		go func() {
			defer s.retiring.Done()
			if err := wk.Destroy(); err != nil {
				reportError("kthread_destroy_worker", wk.name, err)
			}
		}()
	}
	return firstErr, errs
}

// Queue queues w on CPU cpu's worker. If the CPU has no worker (offline,
// out of range, or its worker is being retired), w runs on the fallback
// workqueue instead. It returns true if it queued w, false if w was
// already pending anywhere in the set (a worker of the set or the
// fallback). If w runs now on a worker of the set (or on the fallback), it
// is queued there, behind itself, so that it never runs concurrently with
// itself. It returns false and reports to the error handler when w has no
// function (ErrNoFunc), is busy on a worker outside the set
// (ErrOtherWorker), or the set is destroyed (ErrDestroyed, once). It never
// blocks beyond short locks and makes no allocation, except once per item:
// the first time w goes to a fallback workqueue. Mirrors EROFS's
// z_erofs_decompress_kickoff: rcu_dereference of the CPU's worker, then
// kthread_queue_work() or queue_work() on the fallback.
func (s *PerCPU) Queue(cpu int, w *Work) bool {
	const op = "kthread_queue_work"
	if w == nil || w.fn == nil {
		reportError(op, "", ErrNoFunc)
		return false
	}
	if s.destroyed.Load() {
		if s.reported.CompareAndSwap(false, true) {
			reportError(op, w.Func(), fmt.Errorf("%w: per-CPU set %s", ErrDestroyed, s.name))
		}
		return false
	}
	target := s.fbOwner
	if tbl := *s.workers.Load(); cpu >= 0 && cpu < len(tbl) && tbl[cpu] != nil {
		target = tbl[cpu]
	}
	// Each retry follows the item to the owner it is busy on; that owner
	// either takes it or reports it pending, so two rounds normally do. The
	// bound only guards against an owner that keeps changing.
	for range 64 {
		r, other := target.queue(w, true)
		switch r {
		case queued:
			return true
		case busy:
			return false
		case refused:
			if target == s.fbOwner {
				return false // the fallback workqueue is destroyed; wq reported it
			}
			target = s.fbOwner
		case elsewhere:
			if other.set != s {
				reportError(op, w.Func(), fmt.Errorf("%w: attached to %s, queued on per-CPU set %s", ErrOtherWorker, other.name, s.name))
				return false
			}
			target = other // pending or running there: let that owner decide
		}
	}
	reportError(op, w.Func(), fmt.Errorf("%w: per-CPU set %s: the item keeps moving between workers", ErrOtherWorker, s.name))
	return false
}

// QueueLocal queues w on the worker of the CPU the caller runs on now
// (getcpu(2); the answer may be stale by the time w is queued unless the
// caller is pinned), as Queue does. Mirrors EROFS's use of
// raw_smp_processor_id().
func (s *PerCPU) QueueLocal(w *Work) bool { return s.Queue(sched.GetCPU(), w) }

// Worker returns CPU cpu's worker, or nil when the CPU has none (offline,
// out of range, or the set is destroyed). The answer may be stale at once
// under hotplug. Never blocks.
func (s *PerCPU) Worker(cpu int) *Worker {
	tbl := *s.workers.Load()
	if cpu < 0 || cpu >= len(tbl) {
		return nil
	}
	return tbl[cpu]
}

// CPUs returns the CPUs that have a worker now, in increasing order.
func (s *PerCPU) CPUs() []int {
	var out []int
	for c, wk := range *s.workers.Load() {
		if wk != nil {
			out = append(out, c)
		}
	}
	return out
}

// Fallback returns what runs items for CPUs without a worker, as given to
// NewPerCPU (wqfallback.Workqueue returns its workqueue).
func (s *PerCPU) Fallback() Fallback { return s.fallback }

// FlushWork waits until the last queueing of w, on whichever worker of the
// set or on the fallback, has finished. It returns true if it waited.
// Otherwise as Worker.FlushWork. Mirrors kthread_flush_work() /
// flush_work().
func (s *PerCPU) FlushWork(w *Work) bool { return flushWork(w) }

// CancelWorkSync cancels w wherever it is pending in the set (a worker or
// the fallback) and waits for a running instance. It returns true if w was
// pending. Otherwise as Worker.CancelWorkSync. Mirrors
// kthread_cancel_work_sync() / cancel_work_sync().
func (s *PerCPU) CancelWorkSync(w *Work) bool { return cancelSync("kthread_cancel_work_sync", w) }

// Destroy unsubscribes from hotplug, destroys every worker after its
// queued items have run (including workers being retired after a hotplug
// event), and then closes the fallback (Fallback.Close: wqfallback
// destroys a workqueue it allocated and leaves one passed to it to its
// owner). Afterwards
// Queue returns false and reports ErrDestroyed once. It returns the
// workers' Destroy errors joined (ErrDelayedPending when delayed work
// queued directly on a worker was still armed), nil otherwise; a second
// call waits for the first and returns nil. It must not be called from a
// work function of the set, on one of its workers or on a fallback
// workqueue that Destroy destroys (FallbackCloser): it returns ErrDeadlock
// then, reports it, and changes nothing. Blocks until the
// queued items have run. Mirrors erofs_cpu_hotplug_destroy() +
// erofs_destroy_percpu_workers().
func (s *PerCPU) Destroy() error {
	if a := actingFor(); a != nil && a.set == s {
		err := fmt.Errorf("kthread: destroy per-CPU set %s: %w: called from its own work function", s.name, ErrDeadlock)
		reportError("kthread_destroy_worker", s.name, err)
		return err
	}
	if fc, ok := s.fallback.(FallbackCloser); ok && fc.CloseWouldWait() {
		// An item running on the set's own fallback workqueue: Close
		// would destroy that workqueue, which waits for the item.
		err := fmt.Errorf("kthread: destroy per-CPU set %s: %w: called from an item running on its fallback %s, which Destroy destroys", s.name, ErrDeadlock, s.fallback.Name())
		reportError("kthread_destroy_worker", s.name, err)
		return err
	}
	s.mu.Lock()
	if s.destroyed.Load() {
		s.mu.Unlock()
		<-s.done
		return nil
	}
	s.destroyed.Store(true)
	tbl := *s.workers.Swap(&[]*Worker{})
	s.mu.Unlock()
	// Outside mu: the subscriber may be running and waiting for mu.
	s.cancelSub()
	var errs []error
	for _, wk := range tbl {
		if wk != nil {
			if err := wk.Destroy(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.retiring.Wait()
	s.fallback.Close()
	close(s.done)
	return errors.Join(errs...)
}

// fallbackQueue is a PerCPU set's Fallback as the worker code sees it:
// the fallback owner (a Worker without a thread) runs its items there.
type fallbackQueue struct{ f Fallback }

// fallbackWork is a Work's state on a fallback (Fallback.NewItem).
type fallbackWork = FallbackItem

// insertLocked queues w on the fallback, getting w's fallback state the
// first time. Called with the fallback owner's mu held
// (Worker.insertLocked).
func (f *fallbackQueue) insertLocked(w *Work) result {
	if w.fb == nil {
		w.fb = f.f.NewItem()
		w.fb.Init(w.fn)
	}
	if w.fb.Pending() {
		return busy
	}
	if f.f.Queue(w.fb) {
		return queued
	}
	return refused
}

// pending, idle, flush and cancelSync are Work.Pending, idleLocked,
// flushWork and cancelSync for an item owned by the fallback owner; w.fb
// may still be nil (attached, not yet inserted).
func (f *fallbackQueue) pending(w *Work) bool { return w.fb != nil && w.fb.Pending() }

func (f *fallbackQueue) idle(w *Work) bool { return w.fb == nil || w.fb.Idle() }

func (f *fallbackQueue) flush(w *Work) bool { return w.fb != nil && w.fb.Flush() }

func (f *fallbackQueue) cancelSync(w *Work) bool { return w.fb != nil && w.fb.CancelSync() }
