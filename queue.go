package wq

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqtrace"
)

// The queue path: Queue, QueueOn, QueueNode and the locked half of
// __queue_work that puts an item on a pwq.

// Queue queues w on the pwq of the CPU the caller runs on now (per-CPU
// queues) or of that CPU's pod (unbound queues). It returns false if w was
// already pending or is disabled, true if it queued it. It makes no
// allocation and waits for no item or worker; it takes the pool lock (or
// pushes lock-free while a worker is between items), and on a contended
// lock it sleeps until the holder lets go (see "Never blocks" in the
// package doc). On a destroyed queue it returns false and reports
// ErrDestroyed (once per queue) to the error handler; QueueErr returns
// the reason instead. Mirrors queue_work().
func (q *Workqueue) Queue(w *Work) bool {
	if q == nil {
		reportNilQueue("queue_work_on")
		return false
	}
	return q.result("queue_work_on", w, q.queueOnErr(cpuUnbound, w, nil))
}

// QueueOn queues w on CPU cpu's pwq: for a per-CPU queue the item runs on
// that CPU (or, if the CPU went offline, on the remaining CPUs); for an
// unbound queue in that CPU's pod. Returns as Queue; a cpu that does not
// exist returns false and reports ErrInvalidCPU. Mirrors queue_work_on().
func (q *Workqueue) QueueOn(cpu int, w *Work) bool {
	if q == nil {
		reportNilQueue("queue_work_on")
		return false
	}
	return q.result("queue_work_on", w, q.queueOnChecked(cpu, w))
}

// queueOnChecked is QueueOn without the report: it checks cpu after the
// queue and the function (admit.go's order).
func (q *Workqueue) queueOnChecked(cpu int, w *Work) error {
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if w == nil || w.fn == nil {
		return ErrNoFunc
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
	const op = "queue_work_node"
	if q == nil {
		reportNilQueue(op)
		return false
	}
	if err := q.checkDestroyed(); err != nil {
		return q.result(op, w, err)
	}
	if w == nil || w.fn == nil {
		return q.result(op, w, ErrNoFunc)
	}
	topo := currentTopology()
	cpus := nodeCPUs(topo, node)
	if cpus.IsEmpty() {
		return q.result(op, w, fmt.Errorf("%w: node %d has no online CPU", ErrInvalidArgument, node))
	}
	cpu := currentCPU()
	if !cpus.Has(cpu) {
		cpu = cpus.First()
	}
	return q.result("queue_work_on", w, q.queueOnErr(cpu, w, nil))
}

// queueOnErr is Queue without the report: nil when it queued w,
// errPending when w was pending, otherwise the refusal (admit.go). A
// non-nil plug holds the wake-up (QueueBatch).
func (q *Workqueue) queueOnErr(cpu int, w *Work, plug *wakePlug) error {
	if err := q.checkDestroyed(); err != nil {
		return err
	}
	if w == nil || w.fn == nil {
		return ErrNoFunc
	}
	err := w.pendFast() // pendOn, its common cases inlined
	if err == errPendSlow {
		err = w.pendOn(q)
	}
	if err != nil {
		return err
	}
	return q.queuePendedErr(cpu, w, admitNew, plug)
}

// queuePendedFrom queues an instance of kind k whose PENDING the caller
// owns (__queue_work): admitNew, or admitBack for one admitted before (a
// timer that fired, a key's next item), which a draining queue accepts.
// It returns false, with PENDING released, if the queue refuses it
// (admitPended), and reports the refusal.
func (q *Workqueue) queuePendedFrom(reqCPU int, w *Work, k admitKind) bool {
	return q.result("queue_work_on", w, q.queuePendedErr(reqCPU, w, k, nil))
}

// queuePendedErr is queuePendedFrom without the report: nil when it
// queued w, otherwise the refusal, with w's PENDING released and the
// instance cancelled. Every refusal of the queue path is returned from
// here (admitPended, or a destroy that finished meanwhile), never
// reported here: the bool calls report it (result), the error calls
// (QueueErr, Go, ...) return it. Reporting after the return also means w
// is released before the error handler runs: a handler that panics or
// calls runtime.Goexit must not leave w pending. A non-nil plug holds the
// pool's wake-up instead of waking at unlock (QueueBatch, batch.go).
func (q *Workqueue) queuePendedErr(reqCPU int, w *Work, k admitKind, plug *wakePlug) error {
	stamp := stagesOn() // stage timestamps (stages.go)
	if stamp {
		w.stampQueue()
	}
	if err := q.admitPended(w, k); err != nil {
		return err // lifecycle, other queue, MaxPending (admit.go)
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
			self := transitSelf()
			w.transit.Store(self)
			// A queue_work nested in the tracer (it queues an item) records
			// its item over this one, and puts this one back after.
			outer, _ := transitWork.Load(self)
			rec := &transitRec{w: w, q: q}
			rec.outer, _ = outer.(*transitRec)
			transitWork.Store(self, rec)
			emit(tr, &wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: tid, Work: w.addr(), Function: w.Func(), Workqueue: q.name, ReqCPU: reqCPU, TargetCPU: target},
				func() {
					endTransitWork(self, rec)
					w.transit.Store(0)
					runtime.UnlockOSThread()
					w.markCancelled()
					w.release()
					cancelGoItem(w)
				})
			endTransitWork(self, rec)
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
			if q.life.load().destroyed() {
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

// transitWork maps a transitSelf identity to the items it holds in
// transit while the tracer's queue_work runs on it (a *transitRec: the
// innermost first, when the tracer queues items itself), so that a wait
// that only knows its caller (Group.Wait) can tell that it would wait for
// one of them. Written only while a tracer is set.
var transitWork sync.Map

// transitRec is one item in transit in a queue_work, and the record of
// the queue_work it is nested in (nil if none).
type transitRec struct {
	w     *Work
	q     *Workqueue // the queue w is bound for
	outer *transitRec
}

// endTransitWork ends rec, self's innermost transit record: the record it
// is nested in is put back, if any.
func endTransitWork(self int64, rec *transitRec) {
	if rec.outer != nil {
		transitWork.Store(self, rec.outer)
		return
	}
	transitWork.Delete(self)
}

// inTransitTo reports whether the caller is in the tracer's queue_work of
// an item bound for q (also nested): a Destroy of q there would wait for
// the item the caller itself holds (a fired timer's or ModDelayed's
// instance is counted as firing until queued, and closeTimers waits for
// it). One map load; not skipped when no tracer is set, since a tracer
// may remove itself (SetTracer(nil)) before it destroys the queue.
func (q *Workqueue) inTransitTo() bool {
	v, ok := transitWork.Load(transitSelf())
	if !ok {
		return false
	}
	for r := v.(*transitRec); r != nil; r = r.outer {
		if r.q == q {
			return true
		}
	}
	return false
}

// transitSelf is the caller's identity for Work.transit: its goroutine
// id, or its negated tid where goroutine ids cannot be read.
func transitSelf() int64 {
	if id, ok := sched.GoroutineID(); ok {
		return id
	}
	return -int64(sched.Gettid())
}

// isChained reports whether the caller is a worker (or the rescuer)
// executing an item of q (is_chained_work), also one whose goroutine a
// work function moved off its thread. Costs selfWorker (a goroutine id
// and a map lookup); exact.
func (q *Workqueue) isChained() bool {
	wk := selfWorker()
	if wk == nil {
		return false
	}
	pq := wk.curPwq.Load()
	return pq != nil && pq.wq == q
}
