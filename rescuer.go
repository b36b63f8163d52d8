package wq

import (
	"sync"

	"github.com/gowq/wq/internal/sched"
)

// rescuer is a MemReclaim queue's rescuer thread: when a pool cannot create
// workers and work stays stuck, the pool sends it a mayday and it runs the
// queue's items itself (rescuer_thread).
type rescuer struct {
	wq *Workqueue
	wk *worker // its worker identity; wk.pool switches as it attaches

	mu      sync.Mutex
	mayday  []*pwq // guarded by mu
	stopped bool   // guarded by mu
	done    chan struct{}
	started sync.Once
}

func newRescuer(q *Workqueue) *rescuer {
	r := &rescuer{wq: q, done: make(chan struct{})}
	r.wk = &worker{name: trimName(q.name), rescuer: r}
	return r
}

func trimName(s string) string {
	if len(s) > 15 {
		return s[:15]
	}
	return s
}

func (r *rescuer) sendMayday(pq *pwq) {
	r.mu.Lock()
	for _, x := range r.mayday {
		if x == pq {
			r.mu.Unlock()
			return
		}
	}
	r.mayday = append(r.mayday, pq)
	r.mu.Unlock()
	r.started.Do(func() { sched.GoLocked(r.main) })
	r.wk.parker.Unpark()
}

func (r *rescuer) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	started := true
	r.started.Do(func() { started = false })
	if !started {
		return
	}
	r.wk.parker.Unpark()
	<-r.done
}

// main is the rescuer thread. It is locked to its OS thread for life: it
// takes the affinity and class of each pool it rescues.
func (r *rescuer) main() {
	defer close(r.done)
	r.wk.tid = sched.Gettid()
	_ = sched.SetName(r.wk.name)
	for {
		r.wk.parker.Park()
		r.mu.Lock()
		list := r.mayday
		r.mayday = nil
		stopped := r.stopped
		r.mu.Unlock()
		for _, pq := range list {
			r.rescue(pq)
		}
		if stopped {
			return
		}
	}
}

// rescue runs every item of pq on its pool's worklist.
func (r *rescuer) rescue(pq *pwq) {
	p := pq.pool
	wk := r.wk
	wk.pool = p
	if len(p.cpus) > 0 {
		_ = sched.SetAffinity(0, p.cpus)
	}
	c := p.key.class
	_ = sched.SetAttr(0, sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice})
	p.mu.Lock()
	for {
		var w *Work
		for x := p.worklist.head; x != nil; x = x.next {
			if x.pwq.Load() == pq {
				w = x
				break
			}
		}
		if w == nil {
			break
		}
		p.worklist.remove(w)
		if rn := w.runner.Load(); rn != nil && rn.pool == p && rn.current == w {
			rn.scheduled.pushBack(w)
			continue
		}
		pq.stats.rescued.Add(1)
		if !wk.processOne(w) {
			return // Goexit: the rescuer thread is gone
		}
	}
	p.mu.Unlock()
}
