package wq

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Concurrency management.
//
// The kernel learns that a worker blocks from the scheduler itself
// (wq_worker_sleeping/wq_worker_running) and measures CPU hogs at each tick
// (wq_worker_tick). User space has neither hook, so gowq samples: while any
// worker of a thread-backed pool (per-CPU or unbound; not poolKey.goro) executes an
// item, the CM monitor wakes every cmTick (1 ms) and, for each busy worker,
//   - reads the thread's run state from /proc/self/task/<tid>/stat: a
//     worker in S or D state is sleeping, stops counting in nr_running,
//     and if work is pending the pool wakes another worker (a CM wake-up,
//     counted as CMW); when it is seen running again it counts again;
//   - reads the thread's CPU clock: past cpu_intensive_thresh of CPU time
//     since the item started or last slept, the worker is marked
//     CPU-intensive (counted as CPUitsv) and stops counting.
// An unbound pool's worker still asleep unboundBlockingConfirm (50 us)
// after it was first seen asleep puts the pool in blocking mode
// (pool.concurrency). While a pool has work pending behind a busy worker,
// the monitor samples that pool's running workers every cmFastPoll (20 us)
// with an exact sleep instead, backing off to cmTick while none of them sleeps; so
// the pool starts its next item within tens of us of a worker blocking
// (docs/design.md, "Concurrency management"). The cost is a 2-5 us read per
// running worker per fast sample, only while work waits behind it, and a
// timer wake-up per ms while items run.

var cmMon struct {
	poolService[struct{}]
	wake chan struct{} // buffered(1): an idle monitor waits here
	idle atomic.Bool   // the monitor waits on wake
}

func init() { cmMon.wake = make(chan struct{}, 1) }

func cmRegister(p *pool) {
	cmMon.register(p, struct{}{}, func(stop, done chan struct{}) {
		// The monitor has no P of its own: when every P runs a worker,
		// its wake-up takes one from a worker, whose thread then waits
		// for a P. Inside a work function such a wait looks like a sleep
		// for one sample (a CM wake-up that was not needed; the worker
		// counts again when it is seen running). Reserving a P for the
		// monitor would raise every program's GOMAXPROCS and turn off
		// the runtime's own updates of it (docs/decisions.md).
		err := goLocked(func() {
			raiseMonitor()
			cmMonitor(stop, done)
		})
		if err != nil {
			// The thread gate refused (a thread limit is near): run the
			// monitor on an ordinary goroutine, which needs no thread of
			// its own, at the runtime's priority and timer slack, rather
			// than leave blocked items without a CM wakeup.
			go cmMonitor(stop, done)
			goReport(func() {
				reportError("cm_monitor", "gowq/cm", fmt.Errorf("the CM monitor runs on an ordinary goroutine (no nice -20, no thread of its own): %w", err))
			})
		}
	})
}

func cmUnregister(p *pool) { cmMon.unregister(p) }

// The monitor polls at cmIdlePoll for cmDeepIdleAfter after the pools were
// last busy, then sleeps until cmNotifyBusy. So a worker that starts an item
// pays one atomic load, and a channel send only after a quiet second.
const (
	cmIdlePoll      = 2 * time.Millisecond
	cmDeepIdleAfter = time.Second
)

// cmNotifyBusy is called when a per-CPU pool's worker starts an item; it
// wakes the monitor if it is in deep idle. One atomic load on the hot path.
func cmNotifyBusy() {
	if cmMon.idle.Load() {
		select {
		case cmMon.wake <- struct{}{}:
		default:
		}
	}
}

// raiseMonitor gives the monitor's thread nice -20 where the process may
// (SCHED_OTHER: it competes with CPU hogs at their best, and is never
// starved by them). Not SCHED_FIFO: its sampling, with hundreds of
// blocked workers to read, would keep the process's ordinary threads off
// a CPU, and bursts of blocking items on per-CPU pools then stall (see
// docs/decisions.md, "The CM monitor runs at nice -20"). The priority
// inversion a FIFO monitor would prevent, an ordinary thread preempted
// while it holds an RT pool's lock, is covered by that lock's priority
// inheritance (sched.PIMutex), which boosts the holder only while an RT
// worker waits for it. The cost: under nice -20 hogs on every CPU the
// monitor's reaction to a blocked RT worker can wait for a hog's time
// slice. The thread is locked and dies with the monitor.
func raiseMonitor() {
	_ = sched.SetName("gowq/cm")
	// Short exact sleeps while polling fast (cmFastPoll): without this a
	// SCHED_OTHER thread's sleeps are stretched by the default 50 us slack.
	_ = sched.SetTimerSlack(1)
	if sched.CheckNice(-20) == nil {
		_ = sched.SetAttr(0, sched.Attr{Policy: sched.PolicyNormal, Nice: -20})
	}
}

// cmFastPoll is the shortest sampling interval, used while a pool has
// pending work behind a busy worker: the monitor then polls that
// pool's workers with an exact sleep (clock_nanosleep on its own locked
// thread) instead of a Go timer. Each sample that sees no worker go to
// sleep doubles the interval, up to cmTick; a sample that sees one go to
// sleep resets it; so does a pool that comes to have pending work, and the
// first sample after an idle period is also taken after cmFastPoll. So a
// pool whose items block keeps the fast cadence and
// starts the next item within about cmFastPoll of a worker blocking,
// while a backlog of CPU-bound items costs a few fast samples and then
// runs at the 1 ms cadence.
const cmFastPoll = 20 * time.Microsecond

// cmBackoffMax caps the backed-off interval while pools are busy, also
// when cmTick is set longer (tests set it to an hour to tell the fast path
// from the slow tick).
const cmBackoffMax = time.Millisecond

// cmPolls counts the monitor's samples: fast ones (below cmTick) and all.
// For Stats and the lab's cost figures.
var cmPolls struct{ fast, all atomic.Int64 }

func cmMonitor(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var snap []*pool
	var refs []cmRef
	stats := map[int]*statEntry{}
	var tick uint64
	lastBusy := nanotime()
	var lastFull int64 // ns of the last full sample
	// interval is the wait before the next sample; fast is true while some
	// pool has pending work behind a busy worker.
	interval := cmFastPoll
	fast := false
	// Adaptive placement (escape.go): escNext is when the escape scans
	// want to look again (ns, 0: no pool holds an eligible item);
	// escLastMark is when a marked pool was last seen.
	var escNext, escLastMark int64
	var escWakes []*worker
	defer func() {
		for _, e := range stats {
			_ = e.r.Close()
		}
	}()
	for {
		snap = snap[:0]
		busy, esc := false, false
		cmMon.each(func(p *pool, _ struct{}) {
			snap = append(snap, p)
			if p.busy.Load() > 0 {
				busy = true
			}
			if p.escWatch.Load() {
				esc = true
			}
		})
		now := nanotime()
		if esc {
			escLastMark = now
		}
		// escHot: an escape queue is live and was used within escHold:
		// poll at its escape_after rather than be woken (escape.go).
		ea := time.Duration(escMin.Load())
		escHot := ea > 0 && now-escLastMark < int64(escHold)
		if busy || esc {
			lastBusy = now
		} else if now-lastBusy < int64(cmDeepIdleAfter) {
			// Light idle: poll at cmIdlePoll, so that the workers' hot path
			// needs no notification while the pools are in use.
			fast, interval = false, cmFastPoll
			if escHot && ea < cmIdlePoll {
				// Poll at escape_after, with an exact sleep.
				sched.Nanosleep(int64(max(cmFastPoll, ea)))
				select {
				case <-stop:
					return
				default:
				}
				continue
			}
			if cmWait(t, cmIdlePoll, stop, snap) {
				return
			}
			continue
		} else {
			// Deep idle: wait for cmNotifyBusy.
			fast, interval = false, cmFastPoll
			if h := cmDeepIdleHook.Load(); h != nil {
				(*h)() // tests: a pool registered and busy after the snapshot
			}
			cmMon.idle.Store(true)
			// Re-check after publishing idle, so a start in between is seen:
			// every registered pool, not the snapshot's, as a pool
			// registered since may have started an item before idle was
			// published.
			cmMon.each(func(p *pool, _ struct{}) {
				if p.busy.Load() > 0 || p.escWatch.Load() {
					busy = true
				}
			})
			if !busy {
				select {
				case <-stop:
					cmMon.idle.Store(false)
					return
				case <-cmMon.wake:
				}
			}
			cmMon.idle.Store(false)
			lastBusy = nanotime()
		}
		tickNs := time.Duration(cmTick.Load())
		sleep, wakeable := cmSleep(interval, tickNs, ea, esc, escHot, escNext, now)
		if wakeable {
			// An escape queue is live, quiet for escHold: sleep, but
			// let the first activation that marks a pool wake us.
			if cmWait(t, sleep, stop, snap) {
				return
			}
			if sleep < tickNs {
				cmPolls.fast.Add(1)
			}
		} else if sleep < tickNs {
			// An exact sleep on this locked thread (SCHED_FIFO or timer
			// slack 1 ns): a Go timer would add the wake-up of another
			// thread and tens of us.
			sched.Nanosleep(int64(sleep))
			select {
			case <-stop:
				return
			default:
			}
			cmPolls.fast.Add(1)
		} else {
			t.Reset(sleep)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
		cmPolls.all.Add(1)
		now = nanotime()
		tick++
		// A fast sample reads only the workers that count as running: a
		// sleeping worker waking up, and CPU-intensive detection, are not
		// urgent and are left to the full samples, at most 1 ms apart.
		// With tens of workers asleep in a burst, this keeps a fast sample
		// at one read per pool.
		full := now-lastFull >= int64(min(tickNs, cmBackoffMax))-int64(cmFastPoll)/2
		if full {
			lastFull = now
		}
		wantFast, sawSleep := false, false
		for _, p := range snap {
			if p.busy.Load() > 0 {
				var w, s bool
				refs, w, s = p.cmSample(now, refs[:0], stats, tick, full)
				wantFast = wantFast || w
				sawSleep = sawSleep || s
			}
		}
		if wantFast && (!fast || sawSleep) {
			interval = cmFastPoll
		} else {
			interval = min(2*interval, tickNs, cmBackoffMax)
		}
		fast = wantFast
		escNext = 0
		if esc || escMin.Load() > 0 {
			now = nanotime()
			for _, p := range snap {
				if p.escWatch.Load() {
					var nx int64
					nx, escWakes = p.escScan(now, escWakes)
					if nx > 0 && (escNext == 0 || nx < escNext) {
						escNext = nx
					}
				}
			}
			// Escapers are woken after the pool locks are free (poolMutex).
			for i, wk := range escWakes {
				wk.unpark()
				escWakes[i] = nil
			}
			escWakes = escWakes[:0]
		}
		if tick%1024 == 0 {
			for tid, e := range stats {
				if tick-e.used > 1024 {
					_ = e.r.Close()
					delete(stats, tid)
				}
			}
		}
	}
}

// statEntry is an open stat file of a worker thread, owned by the monitor.
type statEntry struct {
	r    *sched.StatReader
	used uint64 // tick of last use
}

type cmRef struct {
	wk       *worker
	tid      int // wk.tid, read under the pool lock (it is cleared under it)
	gen      uint64
	state    byte
	cpuNs    int64
	haveCPU  bool
	pending  bool
	sleeping bool
	longRun  bool
}

// cmSample samples p's busy workers and applies the CM transitions. It
// reports whether p wants fast sampling (work is pending behind a busy
// worker and worker creation works) and whether a worker was seen going to
// sleep. A sample that is not full looks only at the workers counted as
// running, and reads no CPU clock.
func (p *pool) cmSample(now int64, refs []cmRef, stats map[int]*statEntry, tick uint64, full bool) (_ []cmRef, wantFast, sawSleep bool) {
	thresh := cpuIntensiveThresh.Load()
	p.mu.Lock()
	pending := !p.worklist.empty()
	for _, wk := range p.workers {
		if wk.current == nil || wk.tid == 0 || (!full && (!wk.counted || wk.sleeping)) {
			continue
		}
		refs = append(refs, cmRef{wk: wk, tid: wk.tid, gen: wk.gen, pending: pending, sleeping: wk.sleeping,
			longRun: thresh > 0 && !wk.cpuIntensive && now-wk.currentAt >= thresh})
	}
	p.mu.Unlock()
	// System calls without the pool lock.
	for i := range refs {
		r := &refs[i]
		wk := r.wk
		if r.pending || r.sleeping || r.longRun {
			e := stats[r.tid]
			if e == nil {
				sr, err := sched.OpenStat(r.tid)
				if err != nil {
					continue
				}
				e = &statEntry{r: sr}
				stats[r.tid] = e
			}
			e.used = tick
			inFn := wk.inFn.Load()
			st, err := e.r.State()
			if err != nil {
				_ = e.r.Close()
				delete(stats, r.tid)
				continue
			}
			r.state = st
			if h := cmStateHook.Load(); h != nil {
				(*h)() // tests: the worker moves on between the two reads
			}
			if !inFn || !wk.inFn.Load() {
				// Read before and after the state: a sleep seen outside
				// the work function is the worker's own wait for the
				// pool lock (or for a P on the way to it), not a blocked
				// item; it changes nothing. Only inside fn at both reads
				// was the thread in fn at the state read (same gen,
				// checked below: this item's fn starts once and ends
				// once).
				r.state = 0
			}
		}
		if full && (wk.seenGen != r.gen || r.longRun || (r.sleeping && !sched.Sleeping(r.state))) {
			if c, err := sched.ThreadCPUTime(r.tid); err == nil {
				r.cpuNs, r.haveCPU = c, true
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	wantFast = !p.worklist.empty() && !p.createFailing && p.busy.Load() > 0
	for i := range refs {
		r := &refs[i]
		wk := r.wk
		if wk.current == nil || wk.gen != r.gen {
			continue
		}
		if wk.seenGen != r.gen && r.haveCPU {
			// First sight of this item: start its CPU window here. The
			// item has run at most one tick before this.
			// The worker reads no clock at the item's start (an awake
			// worker makes no system call per item), so count the item as
			// on CPU since it started, for at most one tick: detection
			// errs early by at most a tick, as the kernel's tick-based
			// wq_worker_tick does.
			wk.seenGen = r.gen
			wk.cpuAt = r.cpuNs - min(now-wk.currentAt, int64(time.Duration(cmTick.Load())))
		}
		pq := wk.currentPwq
		switch {
		case r.state != 0 && sched.Sleeping(r.state) && !wk.sleeping:
			wk.sleeping = true
			wk.sleptAt = now
			sawSleep = true
			if p.setCounted(wk, false) {
				if p.needMoreWorker() {
					pq.stats.cmWakeups.Add(1)
					p.wakeOrCreate()
				}
			}
		case r.state != 0 && sched.Sleeping(r.state) && p.key.cpu < 0 && now-wk.sleptAt >= int64(unboundBlockingConfirm):
			// Still asleep a sample later: the item blocks (a thread that
			// only waited for a P or the pool lock is running again by
			// now). An unbound pool whose items block runs all of them at
			// once, as the kernel's do (pool.concurrency).
			p.blockedAt = now
			if !p.blocking {
				p.blocking = true
				unboundBlockingEntries.Add(1)
				if p.needMoreWorker() {
					p.wakeOrCreate()
				}
			}
		case r.state != 0 && !sched.Sleeping(r.state) && wk.sleeping:
			wk.sleeping = false
			if r.haveCPU {
				wk.cpuAt = r.cpuNs
			}
			if !wk.cpuIntensive && wk.rescuer == nil {
				p.setCounted(wk, true)
			}
		}
		if r.longRun && r.haveCPU && !wk.sleeping && !wk.cpuIntensive && r.cpuNs-wk.cpuAt >= thresh {
			wk.cpuIntensive = true
			pq.stats.cpuIntensive.Add(1)
			p.setCounted(wk, false)
			p.wakeOrCreate()
		}
	}
	if p.blocking && now-p.blockedAt > int64(unboundBlockingHold) {
		p.blocking = false
	}
	return refs, wantFast, sawSleep
}

// cmStateHook, when set (tests), is called by cmSample between its read
// of a worker thread's state and its read of worker.inFn.
var cmStateHook atomic.Pointer[func()]

// cmDeepIdleHook, when set (tests), is called by the CM monitor as it
// decides to enter deep idle, before it publishes cmMon.idle.
var cmDeepIdleHook atomic.Pointer[func()]

// unboundBlockingEntries counts the times an unbound pool went unlimited
// (tests).
var unboundBlockingEntries atomic.Int64

// unboundBlockingConfirm is how long a worker of an unbound pool must stay
// asleep before the pool counts its items as blocking: a locked thread
// also sleeps, briefly, while it waits for a P or for the pool lock.
const unboundBlockingConfirm = 50 * time.Microsecond

// unboundBlockingHold is how long an unbound pool stays unlimited after
// the CM monitor last saw one of its workers blocked (pool.concurrency).
const unboundBlockingHold = 10 * time.Millisecond

// wakeOrCreate wakes an idle worker (cmWakeHint), or creates one, when the
// pool needs more workers. Called with mu held.
func (p *pool) wakeOrCreate() {
	if lockdep {
		p.assertHeld()
	}
	if !p.needMoreWorker() {
		return
	}
	if len(p.idle) > 0 {
		p.mu.wake = p.idle[p.cmWakeHint()]
		return
	}
	p.createWorker()
}

// cmWait sleeps d on timer t, or until stop (it then returns true). While
// an escape queue is live it also returns early when an activation marks
// a pool (escNotify sends on cmMon.wake while escWake is set); a pool
// already marked makes it return at once.
func cmWait(t *time.Timer, d time.Duration, stop chan struct{}, snap []*pool) bool {
	var wake chan struct{}
	if escMin.Load() > 0 {
		escWake.Store(true)
		defer escWake.Store(false)
		// Re-check after publishing escWake, so that a mark set in between
		// is seen.
		for _, p := range snap {
			if p.escWatch.Load() {
				return false
			}
		}
		wake = cmMon.wake
	}
	t.Reset(d)
	select {
	case <-stop:
		return true
	case <-t.C:
	case <-wake:
	}
	return false
}

// cmSleep returns the monitor's wait before its next sample when pools are
// in use: interval, shortened to the earliest escape deadline (escNext, ns)
// while a pool is marked (esc), or to escape_after (ea) while escape
// queues are hot; wakeable when an escape queue is live but quiet, so that
// the wait must end at the first marking activation (cmWait).
func cmSleep(interval, tickNs, ea time.Duration, esc, escHot bool, escNext, now int64) (time.Duration, bool) {
	sleep := interval
	if esc {
		// Escape deadlines: sleep until the earliest item falls due.
		d := cmFastPoll
		if escNext > 0 {
			d = max(cmFastPoll, time.Duration(escNext-now))
		}
		sleep = min(sleep, d)
	}
	if ea > 0 && !esc && sleep > ea && !escHot {
		return sleep, true
	}
	if ea > 0 && !esc && sleep > ea {
		// Hot: look again within escape_after, for items activated
		// meanwhile (also when the interval has backed off to the tick:
		// sleep is then below it, an exact sleep).
		sleep = max(cmFastPoll, ea)
	}
	return sleep, false
}
