package wq

import (
	"fmt"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Test hooks.

// SetCreateWorkerHook makes worker creation consult h (nil clears).
func SetCreateWorkerHook(h func() error) {
	if h == nil {
		createWorkerHook.Store(nil)
		return
	}
	createWorkerHook.Store(&h)
}

// WorkerTIDs returns the thread ids of the workers serving q's pwq for cpu.
func (q *Workqueue) WorkerTIDs(cpu int) []int {
	pq := q.table.Load().cpu[cpu]
	p := pq.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []int
	for _, wk := range p.workers {
		if wk.tid != 0 {
			out = append(out, wk.tid)
		}
	}
	return out
}

// PoolCPUs returns the CPUs of the pool serving cpu.
func (q *Workqueue) PoolCPUs(cpu int) []int { return q.table.Load().cpu[cpu].pool.cpus }

// Stat sums a pwq counter over q's pwqs.
func (q *Workqueue) Stat(name string) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	var n int64
	for _, pq := range q.allPwqs {
		s := &pq.stats
		switch name {
		case "total":
			n += s.started.Load()
		case "completed":
			n += s.completed.Load()
		case "cmw":
			n += s.cmWakeups.Load()
		case "cpuitsv":
			n += s.cpuIntensive.Load()
		case "mayday":
			n += s.mayday.Load()
		case "rescued":
			n += s.rescued.Load()
		case "escaped":
			n += s.escaped.Load()
		case "panics":
			n += s.panics.Load()
		}
	}
	return n
}

// NumWorkers returns the number of workers of the pool serving cpu.
func (q *Workqueue) NumWorkers(cpu int) (all, idle int) {
	p := q.table.Load().cpu[cpu].pool
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.workers), len(p.idle)
}

var Gettid = sched.Gettid
var GetCPU = sched.GetCPU

// DumpState prints q's pwqs and pools (debugging aid for hangs).
func (q *Workqueue) DumpState() string {
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	s := ""
	for _, pq := range pwqs {
		p := pq.pool
		p.mu.Lock()
		s += fmt.Sprintf("%v inflight %v color %d waiting %v worklist %d inactive %d workers %d idle %d nrRunning %d lim %d/%d inact %d draining %d\n", p, pq.nrInFlight, pq.color, pq.flushWaiting, p.worklist.len(), pq.inactive.len(), len(p.workers), len(p.idle), p.nrRunning, pq.lim.nrActive.Load(), pq.lim.max.Load(), pq.lim.nrInactive.Load(), q.life.load().drains())
		p.mu.Unlock()
	}
	return s
}

// SetTopologySource injects a topology source (hotplug tests).
var SetTopologySource = setTopologySource

// NumPwqs returns how many pwqs q holds (current and retired-with-items).
func (q *Workqueue) NumPwqs() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.allPwqs)
}

// Held reports whether a CancelSync or DisableSync holds w.
func Held(w *Work) bool { return w.state.Load()&stCanceling != 0 }

// SetExitReportEvery sets the worker-exit report rate limit (a tiny value
// reports every exit) and returns a function that restores it.
func SetExitReportEvery(d time.Duration) func() {
	exitReports.mu.Lock()
	old := exitReports.every
	exitReports.every, exitReports.at, exitReports.missed = d, 0, 0
	exitReports.mu.Unlock()
	return func() {
		exitReports.mu.Lock()
		exitReports.every = old
		exitReports.mu.Unlock()
	}
}

// SetCMTick sets the CM monitor's slow sampling interval (normally 1 ms)
// and returns a function that restores it.
func SetCMTick(d time.Duration) (restore func()) {
	old := cmTick.Swap(int64(d))
	return func() { cmTick.Store(old) }
}

// CMPolls returns the CM monitor's fast samples and all samples so far.
func CMPolls() (fast, all int64) { return cmPolls.fast.Load(), cmPolls.all.Load() }

// UnboundBlockingEntries counts the times an unbound pool was seen with a
// blocked worker and lifted its CPU-count limit.
func UnboundBlockingEntries() int64 { return unboundBlockingEntries.Load() }

// HoldWakeups makes every worker of the pool serving q's pwq for cpu block
// when it is woken, before it takes an item, until release is called: the
// pool cannot start anything, as when its workers cannot get their CPU.
// Only one hold at a time.
func HoldWakeups(q *Workqueue, cpu int) (release func()) {
	target := q.table.Load().cpu[cpu].pool
	ch := make(chan struct{})
	h := func(p *pool) {
		if p == target {
			<-ch
		}
	}
	wakeHook.Store(&h)
	return func() {
		wakeHook.Store(nil)
		close(ch)
	}
}

// EscapeTarget is escapeTarget on the current topology.
func EscapeTarget(cpu int) []int { return escapeTarget(currentTopology(), cpu).List() }

// PendingCount returns q's MaxPending count (backpressure.go), for tests.
func (q *Workqueue) PendingCount() int64 { return q.bp.n.Load() }

// SetBeforeRoomWait sets the hook queueWait calls just before it
// registers as a waiter for room (nil: none), and returns the function
// that removes it.
func SetBeforeRoomWait(h func(q *Workqueue)) (undo func()) {
	beforeRoomWait.Store(&h)
	return func() { beforeRoomWait.Store(nil) }
}

// RoomWaiters returns the number of QueueContext calls waiting for room.
func (q *Workqueue) RoomWaiters() int { return int(q.bp.waiters.Load()) }

// ForceThreads sets the process-wide switch that GOWQ_THREADS=1 sets
// (every pool thread-backed) for queues allocated or reconfigured from now
// on, and returns the function that restores the previous setting.
func ForceThreads(on bool) (undo func()) {
	old := forceThreads.Swap(on)
	return func() { forceThreads.Store(old) }
}

// KeyStates returns the keys with keyed instances in flight on q and the
// key states it holds (in its maps and free lists).
func (q *Workqueue) KeyStates() (keys, held int) { return q.keyStates() }

// KeyedInFlight returns q's count of keyed instances in flight.
func (q *Workqueue) KeyedInFlight() int64 { return q.keyedN.Load() }

// Cancelers returns how many CancelSync/DisableSync calls hold w now.
func (w *Work) Cancelers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancelers
}

// Held reports whether a sync canceller holds w (CANCELING).
func (w *Work) Held() bool { return w.state.Load()&stCanceling != 0 }

// DisableDepth returns w's disable count.
func (w *Work) DisableDepth() int { return int(w.state.Load()&stDisableMask) >> stDisableShift }

// Linked reports whether w is on a list of a pwq (worklist or inactive).
func (w *Work) Linked() bool { return w.pwq.Load() != nil }

// Armed reports whether dw's timer is armed on a queue.
func (dw *DelayedWork) Armed() bool {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.armedOn != nil
}

// FlushWaiters returns how many Flush calls wait for w now.
func (w *Work) FlushWaiters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters)
}

// ParkHandOffs returns how many times a worker handed its P back to the
// runtime before parking (park.go).
func ParkHandOffs() uint64 { return parkHandOffs.Load() }

// StageStamps returns w's queue-side stage stamps (stages.go).
func (w *Work) StageStamps() (queue, locked int64) { return w.stQueue, w.stLocked }

// ArmedOnRT reports whether dw's timer is armed on an RT timer base (the
// RT timer thread) rather than on a Go timer; for the model test.
func (dw *DelayedWork) ArmedOnRT() bool {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.armedOn != nil && dw.timer.OnRT()
}

// SetSetupHook makes the setup of every new worker thread of the pool
// serving q's pwq for cpu call h between reading the pool's CPUs and
// applying them; the returned function removes it.
func SetSetupHook(q *Workqueue, cpu int, h func()) (restore func()) {
	target := q.table.Load().cpu[cpu].pool
	f := func(p *pool) {
		if p == target {
			h()
		}
	}
	setupHook.Store(&f)
	return func() { setupHook.Store(nil) }
}

// MoveOffThread, called from a work function on a thread worker, moves
// the worker's goroutine off its thread (moveOffThread) and reports
// whether it moved.
func MoveOffThread() bool { return moveOffThread() }

// SetGoSlotsOff switches the goroutine items' slots off (true) or on
// (goadmit.go; tests: the rule disabled).
func SetGoSlotsOff(off bool) { setGoSlotsOff(off) }

// Life returns q's lifecycle state: "live", "draining", "destroying" or
// "destroyed" (admit.go).
func (q *Workqueue) Life() string {
	s := q.life.load()
	switch {
	case s.destroyed():
		return "destroyed"
	case s.destroying():
		return "destroying"
	case s.drains() > 0:
		return "draining"
	}
	return "live"
}

// SetRuntimeNice replaces the reading of the runtime threads' nice that
// goroutineBacked makes (sched.RuntimeNice) until restore.
func SetRuntimeNice(f func() (int, bool)) (restore func()) {
	old := runtimeNice
	runtimeNice = f
	return func() { runtimeNice = old }
}

// PoolsGoroutineBacked reports, for each pwq of q's current table, whether
// its pool is goroutine-backed.
func PoolsGoroutineBacked(q *Workqueue) []bool {
	t := q.table.Load()
	var out []bool
	for _, pq := range append(append([]*pwq{t.dfl}, t.pods...), t.cpu...) {
		if pq != nil {
			out = append(out, pq.pool.key.goro)
		}
	}
	return out
}

// TimersFiring returns q's count of armed instances taken off its armed
// list and not yet queued (timerFn, DelayedWork.Flush, ModDelayed in
// transit): a witness that such a call is between its grab and its
// queueing.
func (q *Workqueue) TimersFiring() int {
	q.timerMu.Lock()
	defer q.timerMu.Unlock()
	return q.firing
}

// CheckThreadHeadroom is checkThreadHeadroom, for the external tests that
// run it under real limits.
var CheckThreadHeadroom = checkThreadHeadroom
