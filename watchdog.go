package wq

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Lockup watchdog (the kernel's wq_watchdog): a pool with pending work and
// no progress (no item started or finished) for watchdog_thresh is
// reported once, in the kernel's words, with a dump of its busy workers.

var wdog struct {
	poolService[*wdState]
	thresh   atomic.Int64 // ns; 0 = off
	rtThresh atomic.Int64 // ns; 0 = off
	hook     atomic.Pointer[func(LockupReport)]
}

type wdState struct {
	reported bool
	rtGen    map[*worker]uint64 // item (gen) of each RT worker already reported
}

// LockupReport is what the watchdog reports about a stuck pool.
type LockupReport struct {
	Pool    string        // e.g. "cpus=0 flags=0x0 nice=-20"
	Stuck   time.Duration // how long without progress
	Message string        // the kernel-style "BUG: workqueue lockup - ..." line
	Workers string        // dump of busy workers with their current functions
	Pending int           // items on the pool's worklist
	// RTHog marks a report of an RT item running too long without sleeping
	// (SetRTHogThresh) rather than a lockup.
	RTHog bool
}

func init() {
	wdog.thresh.Store(int64(30 * time.Second))
	wdog.rtThresh.Store(int64(100 * time.Millisecond))
}

// rtHogCheck reports RT workers whose current item has run longer than th
// and whose thread is running (not asleep) now.
func rtHogCheck(th time.Duration) {
	now := nanotime()
	var rtPools []*pool
	var states []*wdState
	wdog.each(func(p *pool, st *wdState) {
		if p.key.class.rt() {
			rtPools = append(rtPools, p)
			states = append(states, st)
		}
	})
	for i, p := range rtPools {
		st := states[i]
		type hog struct {
			wk  *worker
			gen uint64
			tid int
			fn  string
			ran time.Duration
		}
		var hogs []hog
		p.mu.Lock()
		for _, wk := range p.workers {
			if wk.current != nil && wk.tid != 0 && time.Duration(now-wk.currentAt) >= th {
				hogs = append(hogs, hog{wk, wk.gen, wk.tid, wk.current.Func(), time.Duration(now - wk.currentAt)})
			}
		}
		p.mu.Unlock()
		for _, h := range hogs {
			if st.rtGen[h.wk] == h.gen {
				continue
			}
			sr, err := sched.OpenStat(h.tid)
			if err != nil {
				continue
			}
			state, err := sr.State()
			_ = sr.Close()
			if err != nil || sched.Sleeping(state) {
				continue
			}
			if st.rtGen == nil {
				st.rtGen = map[*worker]uint64{}
			}
			st.rtGen[h.wk] = h.gen
			rep := LockupReport{
				Pool:    p.String(),
				Stuck:   h.ran,
				Message: fmt.Sprintf("workqueue: RT work item %s on %s (tid %d) has run for %v without sleeping; it starves every SCHED_OTHER thread on its CPU", h.fn, h.wk.name, h.tid, h.ran.Round(time.Millisecond)),
				Workers: fmt.Sprintf("  %s (tid %d): %s, running for %v\n", h.wk.name, h.tid, h.fn, h.ran.Round(time.Millisecond)),
				RTHog:   true,
			}
			plog().Error(rep.Message, "pool", rep.Pool)
			if hk := wdog.hook.Load(); hk != nil {
				callContained("lockup hook", func() { (*hk)(rep) })
			}
		}
	}
}

func watchdogRegister(p *pool) {
	wdog.register(p, &wdState{}, func(stop, done chan struct{}) { go watchdogLoop(stop, done) })
}

func watchdogUnregister(p *pool) { wdog.unregister(p) }

func watchdogLoop(stop, done chan struct{}) {
	defer close(done)
	for {
		th := time.Duration(wdog.thresh.Load())
		period := th / 4
		if th == 0 || period > time.Second {
			period = time.Second
		}
		if rt := time.Duration(wdog.rtThresh.Load()); rt > 0 && rt/2 < period {
			period = rt / 2
		}
		if period < time.Millisecond {
			period = time.Millisecond
		}
		select {
		case <-stop:
			return
		case <-time.After(period):
		}
		if rt := time.Duration(wdog.rtThresh.Load()); rt > 0 {
			rtHogCheck(rt)
		}
		if th == 0 {
			continue
		}
		watchdogCheck(th)
	}
}

func watchdogCheck(th time.Duration) {
	now := nanotime()
	type item struct {
		p  *pool
		st *wdState
	}
	var items []item
	wdog.each(func(p *pool, st *wdState) { items = append(items, item{p, st}) })
	for _, it := range items {
		p := it.p
		p.mu.Lock()
		pending := p.worklist.len()
		p.mu.Unlock()
		stuck := time.Duration(now - p.progress.Load())
		if pending == 0 || stuck < th {
			it.st.reported = false
			continue
		}
		if it.st.reported {
			continue
		}
		it.st.reported = true
		rep := p.lockupReport(stuck, pending)
		plog().Error(rep.Message, "pool", rep.Pool, "pending", rep.Pending, "workers", rep.Workers)
		if h := wdog.hook.Load(); h != nil {
			callContained("lockup hook", func() { (*h)(rep) })
		}
	}
}

func (p *pool) flagsString() string {
	if p.key.cpu < 0 {
		return "0x4" // POOL_DISASSOCIATED-like marker for unbound pools, as the kernel prints
	}
	return "0x0"
}

func (p *pool) lockupReport(stuck time.Duration, pending int) LockupReport {
	var where string
	if p.key.cpu >= 0 {
		where = fmt.Sprintf("cpus=%d node=0", p.key.cpu)
	} else {
		where = "cpus=" + p.key.pod
	}
	cls := p.key.class
	desc := fmt.Sprintf("%s flags=%s nice=%d", where, p.flagsString(), cls.nice)
	if cls.rt() {
		desc += fmt.Sprintf(" policy=%s prio=%d", cls.policy, cls.prio)
	}
	var b strings.Builder
	for _, wi := range p.snapshotWorkers() {
		if wi.Idle || wi.Func == "" {
			continue
		}
		fmt.Fprintf(&b, "  %s (tid %d): %s, running for %v\n", wi.Name, wi.TID, wi.Func, time.Duration(wi.RunningNs).Round(time.Millisecond))
	}
	return LockupReport{
		Pool:    desc,
		Stuck:   stuck,
		Message: fmt.Sprintf("BUG: workqueue lockup - pool %s stuck for %ds!", desc, int(stuck/time.Second)),
		Workers: b.String(),
		Pending: pending,
	}
}
