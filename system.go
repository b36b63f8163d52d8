package wq

import (
	"context"
	"sync"
)

// registry of live workqueues (the kernel's workqueues list).
var queues struct {
	mu     sync.Mutex
	m      map[*Workqueue]struct{}
	frozen bool // guarded by mu
}

func registerQueue(q *Workqueue) {
	queues.mu.Lock()
	if queues.m == nil {
		queues.m = make(map[*Workqueue]struct{})
	}
	queues.m[q] = struct{}{}
	if queues.frozen && q.flags&Freezable != 0 {
		q.setFrozen(true)
	}
	queues.mu.Unlock()
}

func unregisterQueue(q *Workqueue) {
	queues.mu.Lock()
	delete(queues.m, q)
	queues.mu.Unlock()
}

func liveQueues() []*Workqueue {
	queues.mu.Lock()
	defer queues.mu.Unlock()
	out := make([]*Workqueue, 0, len(queues.m))
	for q := range queues.m {
		out = append(out, q)
	}
	return out
}

func (q *Workqueue) setFrozen(on bool) {
	q.mu.Lock()
	q.frozen.Store(on)
	lims := append([]*activeLimit(nil), q.lims...)
	q.mu.Unlock()
	for _, l := range lims {
		l.frozen.Store(on)
		if !on {
			l.scan(nil)
		}
	}
}

// FreezeAll freezes every Freezable workqueue: items already started finish,
// queued items stay queued and nothing new starts until ThawAll. It waits
// until no item of a Freezable queue is active. Mirrors
// freeze_workqueues_begin() + freeze_workqueues_busy().
func FreezeAll() { _ = FreezeAllContext(context.Background()) }

// FreezeAllContext is FreezeAll bounded by ctx; on ctx's end the queues
// stay frozen (call ThawAll) and ctx.Err() is returned. A nil ctx returns
// an error matching ErrInvalidArgument and freezes nothing.
func FreezeAllContext(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	queues.mu.Lock()
	queues.frozen = true
	var qs []*Workqueue
	for q := range queues.m {
		if q.flags&Freezable != 0 {
			qs = append(qs, q)
		}
	}
	queues.mu.Unlock()
	for _, q := range qs {
		q.setFrozen(true)
	}
	for spins := 0; ; spins++ {
		busy := false
		for _, q := range qs {
			q.mu.Lock()
			for _, l := range q.lims {
				if l.nrActive.Load() > 0 {
					busy = true
				}
			}
			q.mu.Unlock()
		}
		if !busy {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		backoff(spins)
	}
}

// ThawAll undoes FreezeAll: queued items of Freezable queues start.
// Mirrors thaw_workqueues().
func ThawAll() {
	queues.mu.Lock()
	queues.frozen = false
	var qs []*Workqueue
	for q := range queues.m {
		if q.flags&Freezable != 0 {
			qs = append(qs, q)
		}
	}
	queues.mu.Unlock()
	for _, q := range qs {
		q.setFrozen(false)
	}
}

// System workqueues, created on first use with no threads before.
var sysQueues struct {
	once                                                      [6]sync.Once
	system, highPri, long, unbound, freezable, powerEfficient *Workqueue
}

func sysAlloc(i int, dst **Workqueue, name string, flags Flags, maxActive int) *Workqueue {
	sysQueues.once[i].Do(func() {
		q, err := Alloc(name, flags, maxActive, AllowRTFallback())
		if err != nil {
			panic("wq: cannot create " + name + ": " + err.Error()) // flags are constant and valid
		}
		*dst = q
	})
	return *dst
}

// System returns the per-CPU system workqueue (system_wq, "events").
func System() *Workqueue { return sysAlloc(0, &sysQueues.system, "events", PerCPU, 0) }

// SystemHighPri returns the per-CPU high-priority system workqueue
// (system_highpri_wq, "events_highpri"). Without the privilege for nice
// -20 it falls back to nice 0 with a warning.
func SystemHighPri() *Workqueue {
	return sysAlloc(1, &sysQueues.highPri, "events_highpri", PerCPU|HighPri, 0)
}

// SystemLong returns the system workqueue for long-running items
// (system_long_wq, "events_long").
func SystemLong() *Workqueue { return sysAlloc(2, &sysQueues.long, "events_long", PerCPU, 0) }

// SystemUnbound returns the unbound system workqueue (system_unbound_wq,
// "events_unbound", max_active 512).
func SystemUnbound() *Workqueue {
	return sysAlloc(3, &sysQueues.unbound, "events_unbound", Unbound, 512)
}

// SystemFreezable returns the freezable per-CPU system workqueue
// (system_freezable_wq, "events_freezable").
func SystemFreezable() *Workqueue {
	return sysAlloc(4, &sysQueues.freezable, "events_freezable", PerCPU|Freezable, 0)
}

// SystemPowerEfficient returns the power-efficient system workqueue
// (system_power_efficient_wq, "events_power_efficient").
func SystemPowerEfficient() *Workqueue {
	return sysAlloc(5, &sysQueues.powerEfficient, "events_power_efficient", PowerEfficient, 0)
}
