package wq

import (
	"fmt"
	"sync"

	"github.com/gowq/wq/internal/sched"
)

// rescuer is a MemReclaim queue's rescuer: when a pool cannot create
// workers and the queue's items wait with no worker running, the pool's
// mayday timer sends it a mayday, and it attaches to the pool and runs the
// queue's items there with the same item loop as the pool's workers
// (rescuer_thread, process_scheduled_works). A MemReclaim rescuer's thread
// is started by Alloc, as alloc_workqueue creates the rescuer up front, so
// that an emergency (no thread can be created) never needs a new thread;
// an escaper's is started on its first escape. Either is replaced if a
// work function ends it, through the thread gate: a refused start is
// retried at the next mayday.
type rescuer struct {
	wq *Workqueue

	mu      sync.Mutex
	pending []*pwq  // guarded by mu: pwqs that sent a mayday
	stopped bool    // guarded by mu
	wk      *worker // guarded by mu: the worker identity of the current thread, nil while none runs
	startAt int64   // guarded by mu: ns of the last reported start refusal
	threads sync.WaitGroup

	// escape: this is a per-CPU queue's escaper (escape.go), not a
	// MemReclaim rescuer: it runs overdue items of a pool on another CPU,
	// whether or not the pool has a running worker. Immutable.
	escape bool
	// The escaper's current affinity (list format) and class, to skip the
	// system calls when they do not change. Owned by the thread; cleared
	// when a thread starts.
	escCPUs     string
	escClass    classAttrs
	escClassSet bool
}

func newRescuer(q *Workqueue) *rescuer { return &rescuer{wq: q} }

func trimName(s string) string {
	if len(s) > 15 {
		return s[:15]
	}
	return s
}

// sendMayday asks the rescuer to rescue pq (send_mayday) and wakes it.
func (r *rescuer) sendMayday(pq *pwq) {
	if wk := r.mayday(pq); wk != nil {
		wk.unpark()
	}
}

// mayday queues pq for the rescuer, starting its thread if needed, and
// returns the rescuer worker to wake (nil when stopped). May be called with
// pq's pool lock held; the caller wakes the rescuer after unlocking.
func (r *rescuer) mayday(pq *pwq) *worker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	dup := false
	for _, x := range r.pending {
		if x == pq {
			dup = true
			break
		}
	}
	if !dup {
		r.pending = append(r.pending, pq)
	}
	if r.wk == nil {
		if err := r.startLocked(); err != nil {
			// The thread gate refused: pq stays on the mayday list and the
			// next mayday (the pool's timer, or the next escape scan)
			// tries again. Reported at most every createReportEvery.
			if now := nanotime(); r.startAt == 0 || now-r.startAt >= int64(createReportEvery) {
				r.startAt = now
				op := "rescuer_thread"
				if r.escape {
					op = "escape"
				}
				name := r.wq.name
				goReport(func() { reportError(op, name, err) })
			}
		}
	}
	return r.wk
}

// startLocked starts a rescuer thread with a fresh worker identity through
// the thread gate; an error (wrapping ErrThreadLimit) leaves r.wk nil.
// Called with r.mu held.
func (r *rescuer) startLocked() error {
	name := r.wq.name
	if r.escape {
		name = "esc/" + name
	}
	wk := &worker{name: trimName(name), rescuer: r}
	r.threads.Add(1)
	wk.unpark() // serve the mayday list at once
	if err := goLocked(func() { r.main(wk) }); err != nil {
		r.threads.Done()
		return err
	}
	r.wk = wk
	return nil
}

// start starts a MemReclaim rescuer's thread (Alloc). An error wraps
// ErrThreadLimit.
func (r *rescuer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.startLocked()
}

// replace starts a new thread for the rescuer after wk's was lost
// (runtime.Goexit or runtime.UnlockOSThread in a rescued item), unless the
// rescuer is stopped.
func (r *rescuer) replace(wk *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wk != wk {
		return
	}
	r.wk = nil
	if !r.stopped {
		// A refusal leaves r.wk nil: the next mayday starts one.
		_ = r.startLocked()
	}
}

// stop ends the rescuer and waits for its thread. The queue is drained by
// then.
func (r *rescuer) stop() {
	r.mu.Lock()
	r.stopped = true
	r.pending = nil
	wk := r.wk
	r.mu.Unlock()
	if wk != nil {
		wk.unpark()
	}
	r.threads.Wait()
}

// main is a rescuer thread. It is locked to its OS thread for life: it
// takes the affinity and class of each pool it rescues.
func (r *rescuer) main(wk *worker) {
	defer r.threads.Done()
	tid := sched.Gettid()
	clean := false
	defer func() {
		if !clean {
			if rec := recover(); rec != nil {
				panic(rec) // a bug in gowq itself (user code is recovered)
			}
			// runtime.Goexit in a rescued item. The item may have unlocked
			// the goroutine and moved it first: the rescuer's thread, with
			// the rescued pool's affinity and class, is then the runtime's.
			// Reset it (as a worker's main does) before a replacement
			// starts, whichever thread the goroutine ends on.
			_, _ = sched.ResetThreadIf(tid, wk.claim)
			wk.exitAbnormal(fmt.Errorf("%w: rescuer %s: runtime.Goexit in a rescued item; the rescuer was restarted", ErrWorkerExit, wk.name))
		}
	}()
	r.mu.Lock()
	wk.setIdentity(tid)
	r.mu.Unlock()
	// A new thread (the first, or one that replaces a lost thread) has the
	// process's affinity and class, not those cached by the thread before.
	r.escCPUs, r.escClassSet = "", false
	wk.lastCPU, wk.cpuReadAt = sched.SelfCPUTime(), nanotime() // the first settleCPU charges from here
	_ = sched.SetName(wk.name)
	for {
		wk.settleCPU(0)
		wk.park()
		for {
			r.mu.Lock()
			if r.stopped || len(r.pending) == 0 {
				stopped := r.stopped
				r.mu.Unlock()
				if stopped {
					wk.clearIdentity()
					clean = true
					return
				}
				break
			}
			pq := r.pending[0]
			r.pending = r.pending[1:]
			r.mu.Unlock()
			ok := false
			if r.escape {
				ok = r.escapeFrom(wk, pq)
			} else {
				ok = r.rescue(wk, pq)
			}
			if !ok {
				clean = true // retired and replaced in lostThread
				return
			}
		}
	}
}

// rescue runs pq's items from its pool's worklist, attached to the pool,
// while the pool has no running worker. It returns false when the thread
// was lost (the rescuer has been replaced).
func (r *rescuer) rescue(wk *worker, pq *pwq) bool {
	p := pq.pool
	p.mu.Lock()
	// The kernel rescues only while no worker runs (need_to_create_worker).
	if p.dead || (!p.needMoreWorker() && !p.slotStarved.Load()) {
		p.mu.Unlock()
		return true
	}
	cpus := p.cpus
	c := p.key.class
	p.mu.Unlock()
	if len(cpus) > 0 {
		_ = sched.SetAffinity(0, cpus)
	}
	_ = sched.SetAttr(0, sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice})

	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return true
	}
	wk.curPool.Store(p)
	// assign_work: pq's items move to the rescuer's scheduled list, or to
	// the scheduled list of the worker that runs them now.
	for x := p.worklist.head(); x != nil; {
		next := x.next()
		if x.pwq.Load() == pq {
			p.worklist.remove(x)
			if rn := x.runner.Load(); rn != nil && rn != wk && rn.curPool.Load() == p && rn.current == x {
				rn.scheduled.pushBack(x)
			} else {
				wk.scheduled.pushBack(x)
			}
		}
		x = next
	}
	if !wk.processScheduled() {
		return false
	}
	// Items that the rescued ones activated or chained: rescue again
	// without waiting for the next mayday interval.
	if p.needToCreate() {
		for x := p.worklist.head(); x != nil; x = x.next() {
			if x.pwq.Load() == pq {
				r.sendMayday(pq)
				break
			}
		}
	}
	wk.curPool.Store(nil)
	p.kick() // leave the pool with its workers woken
	p.mu.Unlock()
	return true
}
