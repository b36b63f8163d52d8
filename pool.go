package wq

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
	"github.com/gowq/wq/wqtrace"
)

// classAttrs is a worker class: scheduling policy, RT priority and nice.
type classAttrs struct {
	policy sched.Policy
	prio   int
	nice   int
}

func (c classAttrs) rt() bool { return c.policy == sched.PolicyFIFO || c.policy == sched.PolicyRR }

// suffix is the worker-name suffix of the class: "F" for SCHED_FIFO (seed
// 000), "H" for nice < 0, "" otherwise.
func (c classAttrs) suffix() string {
	switch {
	case c.rt():
		return "F"
	case c.nice < 0:
		return "H"
	}
	return ""
}

// poolKey identifies a worker pool. Per-CPU pools have cpu >= 0; unbound
// pools have cpu == -1 and are shared by all workqueues whose attributes
// produce the same key (the kernel's unbound_pool_hash).
type poolKey struct {
	cpu    int
	class  classAttrs
	pod    string // unbound: the pod's CPUs (list format)
	allow  string // unbound: CPUs the workers may run on (pod if strict)
	strict bool
}

// pool is a worker pool: a worklist of active items and the workers that
// run them (struct worker_pool).
//
// Locking: mu guards every field marked so, and the list links of every
// Work on worklist or on the inactive list of a pwq of this pool. Lock
// order: pool.mu before Work.mu; never two pool locks at once.
type pool struct {
	key  poolKey
	id   int
	cm   bool  // concurrency-managed (per-CPU pools)
	cpus []int // CPUs workers may run on; immutable except under mu on hotplug
	// Non-strict unbound pools whose pod is narrower than the CPUs their
	// workers may use start each item inside the pod (repatriation, the
	// kernel's wake_cpu hint done by hand). Immutable.
	repatriate bool
	pod        []int
	podSet     topology.CPUSet

	mu            poolMutex
	worklist      workList  // guarded by mu
	workers       []*worker // guarded by mu
	idle          []*worker // guarded by mu: idle stack, most recent last
	nrRunning     int       // guarded by mu: CM: workers running and not sleeping/CPU-intensive
	nextID        int       // guarded by mu
	dead          bool      // guarded by mu
	disassociated bool      // guarded by mu: per-CPU pool whose CPU is offline
	idleTimer     *time.Timer
	maydayTimer   *time.Timer // guarded by mu
	createErr     error       // guarded by mu: last worker creation error

	refs     int // guarded by poolRegistry.mu
	exited   sync.WaitGroup
	progress atomic.Int64 // ns of last item completion or pickup (watchdog)
	busy     atomic.Int32 // workers executing an item
}

var poolRegistry struct {
	mu     sync.Mutex
	m      map[poolKey]*pool
	nextID int
}

// getPool returns the pool for key, creating it (with no workers) if
// needed, and takes a reference.
func getPool(key poolKey, cpus []int) *pool {
	p, first := getPoolLocked(key, cpus)
	if first {
		// Outside the registry lock: the watcher's goroutine takes it.
		startHotplugWatch()
	}
	return p
}

func getPoolLocked(key poolKey, cpus []int) (*pool, bool) {
	r := &poolRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[poolKey]*pool)
	}
	first := len(r.m) == 0
	p := r.m[key]
	if p == nil {
		p = &pool{key: key, id: r.nextID, cm: key.cpu >= 0, cpus: cpus}
		if key.cpu < 0 && !key.strict && key.pod != key.allow {
			if ps, err := topology.ParseList(key.pod); err == nil && !ps.IsEmpty() {
				p.repatriate, p.pod, p.podSet = true, ps.List(), ps
			}
		}
		r.nextID++
		p.progress.Store(nanotime())
		r.m[key] = p
		if p.cm {
			cmRegister(p)
		}
		watchdogRegister(p)
		if key.class.rt() {
			reserveP(1)
		}
	}
	p.refs++
	return p, first
}

// put drops a reference; the last one destroys the pool and waits for its
// workers to exit. The pool must hold no work by then.
func (p *pool) put() {
	r := &poolRegistry
	r.mu.Lock()
	p.refs--
	if p.refs > 0 {
		r.mu.Unlock()
		return
	}
	delete(r.m, p.key)
	last := len(r.m) == 0
	r.mu.Unlock()
	if last {
		stopHotplugWatch()
	}
	if p.cm {
		cmUnregister(p)
	}
	watchdogUnregister(p)
	if p.key.class.rt() {
		defer reserveP(-1)
	}
	p.mu.Lock()
	p.dead = true
	if p.idleTimer != nil {
		p.idleTimer.Stop()
	}
	if p.maydayTimer != nil {
		p.maydayTimer.Stop()
	}
	for _, wk := range p.workers {
		wk.dying = true
		wk.parker.Unpark()
	}
	p.mu.Unlock()
	p.exited.Wait()
}

// String describes the pool like wq_dump.py: "pool 3 cpu=0 nice=-20".
func (p *pool) String() string {
	s := "pool " + strconv.Itoa(p.id)
	if p.key.cpu >= 0 {
		s += " cpu=" + strconv.Itoa(p.key.cpu)
	} else {
		s += " cpus=" + p.key.pod
		if p.key.strict {
			s += " strict"
		}
	}
	c := p.key.class
	if c.rt() {
		return s + " policy=" + c.policy.String() + " prio=" + strconv.Itoa(c.prio)
	}
	return s + " nice=" + strconv.Itoa(c.nice)
}

// needMoreWorker: work is pending and no worker is running
// (need_more_worker). guarded by mu.
func (p *pool) needMoreWorker() bool { return !p.worklist.empty() && p.nrRunning == 0 }

// keepWorking: work is pending and at most the caller runs (keep_working).
func (p *pool) keepWorking() bool { return !p.worklist.empty() && p.nrRunning <= 1 }

// kick wakes an idle worker if the pool needs one (kick_pool); with no
// worker at all it creates the first. Called with mu held.
func (p *pool) kick() {
	if !p.needMoreWorker() {
		return
	}
	if n := len(p.idle); n > 0 {
		p.mu.wake = p.idle[n-1]
		return
	}
	if len(p.workers) == 0 {
		p.createWorker()
	}
}

// poolMutex is the pool lock. A worker woken while the lock is held is
// woken only by Unlock, after the lock is free: an RT worker woken inside
// the critical section would preempt the waker on its CPU and then block
// on the very lock the preempted waker holds.
type poolMutex struct {
	m    sync.Mutex
	wake *worker // guarded by m: worker to unpark at Unlock
}

func (pm *poolMutex) Lock() { pm.m.Lock() }

func (pm *poolMutex) Unlock() {
	wk := pm.wake
	pm.wake = nil
	pm.m.Unlock()
	if wk != nil {
		wk.parker.Unpark()
	}
}

// createWorkerHook, when set (tests), is consulted before each worker
// creation; an error makes the creation fail (to exercise the rescuer).
var createWorkerHook atomic.Pointer[func() error]

// createWorker adds an idle worker with a token, so it starts serving as
// soon as its thread is set up; it does not wait for the thread. On failure
// it arms the mayday timer. Called with mu held. Mirrors create_worker.
func (p *pool) createWorker() bool {
	if p.dead {
		return false
	}
	if h := createWorkerHook.Load(); h != nil {
		if err := (*h)(); err != nil {
			p.createErr = err
			p.startMayday()
			return false
		}
	}
	wk := &worker{pool: p, id: p.nextID}
	p.nextID++
	if p.key.cpu >= 0 {
		wk.name = fmt.Sprintf("kworker/%d:%d%s", p.key.cpu, wk.id, p.key.class.suffix())
	} else {
		wk.name = fmt.Sprintf("kworker/u%d:%d%s", p.id, wk.id, map[bool]string{true: "F"}[p.key.class.rt()])
	}
	p.workers = append(p.workers, wk)
	wk.idle = true
	wk.lastActive = nanotime()
	p.idle = append(p.idle, wk)
	wk.parker.Unpark()
	p.exited.Add(1)
	sched.GoLocked(wk.main)
	return true
}

// removeWorker unlinks wk from the pool's lists. Called with mu held.
func (p *pool) removeWorker(wk *worker) {
	for i, x := range p.workers {
		if x == wk {
			p.workers = append(p.workers[:i], p.workers[i+1:]...)
			break
		}
	}
	p.leaveIdle(wk)
}

func (p *pool) enterIdle(wk *worker) {
	wk.idle = true
	wk.lastActive = nanotime()
	p.idle = append(p.idle, wk)
	if p.tooManyWorkers() {
		p.armIdleTimer()
	}
}

func (p *pool) leaveIdle(wk *worker) {
	if !wk.idle {
		return
	}
	wk.idle = false
	for i := len(p.idle) - 1; i >= 0; i-- {
		if p.idle[i] == wk {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
}

// tooManyWorkers mirrors too_many_workers(): more than two idle workers
// and idle workers at least a quarter of the busy ones.
func (p *pool) tooManyWorkers() bool {
	nIdle := len(p.idle)
	nBusy := len(p.workers) - nIdle
	return nIdle > 2 && (nIdle-2)*4 >= nBusy
}

func (p *pool) armIdleTimer() {
	d := time.Duration(idleTimeout.Load())
	if p.idleTimer == nil {
		p.idleTimer = time.AfterFunc(d, p.reapIdle)
		return
	}
	p.idleTimer.Reset(d)
}

// reapIdle destroys idle workers that idled longer than the idle timeout
// while there are too many (idle_worker_timeout), keeping at least two.
func (p *pool) reapIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead {
		return
	}
	timeout := idleTimeout.Load()
	now := nanotime()
	for p.tooManyWorkers() {
		wk := p.idle[0] // least recently active
		if left := wk.lastActive + timeout - now; left > 0 {
			p.idleTimer.Reset(time.Duration(left))
			return
		}
		p.removeWorker(wk)
		wk.dying = true
		wk.parker.Unpark()
	}
}

// startMayday arms the mayday timer: if work stays stuck for lack of
// workers, rescuers are summoned (the kernel's pool_mayday_timeout).
func (p *pool) startMayday() {
	if p.maydayTimer == nil {
		p.maydayTimer = time.AfterFunc(maydayInitial, p.maydayTimeout)
		return
	}
	p.maydayTimer.Reset(maydayInitial)
}

const (
	maydayInitial  = 10 * time.Millisecond  // MAYDAY_INITIAL_TIMEOUT
	maydayInterval = 100 * time.Millisecond // MAYDAY_INTERVAL
)

func (p *pool) maydayTimeout() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead || p.worklist.empty() || len(p.idle) > 0 {
		return
	}
	// Retry the creation first, as the manager would.
	if p.createWorker() {
		return
	}
	seen := map[*pwq]bool{}
	for w := p.worklist.head; w != nil; w = w.next {
		pq := w.pwq.Load()
		if pq == nil || seen[pq] {
			continue
		}
		seen[pq] = true
		if r := pq.wq.rescuer; r != nil {
			pq.stats.mayday.Add(1)
			r.sendMayday(pq)
		}
	}
	p.maydayTimer.Reset(maydayInterval)
}

// worker is one OS thread serving a pool (struct worker).
type worker struct {
	pool   *pool // the pool it serves; a rescuer changes it under its own loop
	id     int
	name   string
	tid    int // set by the worker's thread before it serves; read under pool.mu
	parker sched.Parker

	idle         bool                // guarded by pool.mu
	dying        bool                // guarded by pool.mu
	counted      bool                // guarded by pool.mu: counted in pool.nrRunning
	sleeping     bool                // guarded by pool.mu: seen blocked by the CM monitor
	cpuIntensive bool                // guarded by pool.mu
	current      *Work               // guarded by pool.mu
	currentPwq   *pwq                // guarded by pool.mu
	scheduled    workList            // guarded by pool.mu: items to run next, after the current one (non-reentrance)
	allow        []int               // owned by the worker: the pool's CPUs, for repatriation
	curPwq       atomic.Pointer[pwq] // atomic copy of currentPwq for Queue's non-reentrance check
	currentAt    int64               // guarded by pool.mu: ns when the current item started
	gen          uint64              // guarded by pool.mu: items started
	lastActive   int64               // guarded by pool.mu: ns when it last went idle

	cpuStart atomic.Int64 // written by the worker: thread CPU ns at item start, -1 when unknown
	lastCPU  int64        // owned by the worker: its thread CPU ns at the end of its last item
	cpuAt    int64        // owned by the CM monitor: thread CPU ns at item start or wake
	seenAt   uint64
	rescuer  *rescuer // non-nil for a rescuer thread
}

// main is the worker thread, run by sched.GoLocked: locked to an OS thread
// other than the main thread and never unlocked, because the thread's
// policy, nice and affinity are changed and it must die with this goroutine
// rather than go back to the runtime.
func (wk *worker) main() {
	p := wk.pool
	defer p.exited.Done()
	tid := sched.Gettid()
	p.mu.Lock()
	wk.tid = tid
	p.mu.Unlock()
	if err := wk.setup(p); err != nil {
		p.mu.Lock()
		p.removeWorker(wk)
		p.createErr = err
		if !p.worklist.empty() {
			p.startMayday()
		}
		p.mu.Unlock()
		reportError("create_worker", wk.name, err)
		return
	}
	wk.lastCPU = sched.SelfCPUTime()
	wk.loop()
}

// setup names the thread and applies the pool's affinity and class.
func (wk *worker) setup(p *pool) error {
	_ = sched.SetName(wk.name)
	p.mu.Lock()
	cpus := p.cpus
	p.mu.Unlock()
	if len(cpus) > 0 {
		if err := sched.SetAffinity(0, cpus); err != nil {
			return err
		}
	}
	c := p.key.class
	if c.policy != sched.PolicyNormal || c.nice != 0 {
		if err := sched.SetAttr(0, sched.Attr{Policy: c.policy, Priority: c.prio, Nice: c.nice}); err != nil {
			return err
		}
	}
	return nil
}

// loop is worker_thread(): park until kicked, then run items while the
// pool's concurrency management allows.
func (wk *worker) loop() {
	p := wk.pool
	for {
		wk.parker.Park()
		p.mu.Lock()
		if wk.dying {
			p.removeWorker(wk)
			p.mu.Unlock()
			return
		}
		p.leaveIdle(wk)
		if p.needMoreWorker() {
			// Keep an idle worker around so that there is someone to wake
			// when this one sleeps (may_start_working/manage_workers).
			if len(p.idle) == 0 {
				p.createWorker()
			}
			if p.cm {
				wk.counted = true
				p.nrRunning++
			}
			for {
				w := p.worklist.popFront()
				if r := w.runner.Load(); r != nil && r != wk && r.pool == p && r.current == w {
					// Non-reentrance: another worker of this pool runs w
					// now; it runs w again after (move_linked_works).
					r.scheduled.pushBack(w)
				} else if !wk.processOne(w) {
					return // runtime.Goexit in the work function
				}
				for !wk.scheduled.empty() {
					if !wk.processOne(wk.scheduled.popFront()) {
						return
					}
				}
				if !p.keepWorking() {
					break
				}
			}
			if wk.counted {
				wk.counted = false
				p.nrRunning--
			}
		}
		p.enterIdle(wk)
		p.mu.Unlock()
	}
}

// processOne runs w, popped from p.worklist. Called and returns with
// pool.mu held; returns false when the work function called
// runtime.Goexit, in which case the worker is gone and the lock released.
// Mirrors process_one_work.
func (wk *worker) processOne(w *Work) bool {
	p := wk.pool
	pq := w.pwq.Load()
	w.pwq.Store(nil)
	now := nanotime()
	wk.current, wk.currentPwq, wk.currentAt = w, pq, now
	wk.gen++
	wk.cpuStart.Store(-1) // until runItem reads the clock; the CM monitor then knows it is unknown
	wk.curPwq.Store(pq)
	w.runner.Store(wk)
	if pq.wq.flags&CPUIntensive != 0 {
		wk.cpuIntensive = true
		if wk.counted {
			wk.counted = false
			p.nrRunning--
		}
	}
	// Chain wake-ups: unbound pools are not concurrency-managed, so each
	// pending item gets its own worker.
	p.kick()
	if p.busy.Add(1) == 1 && p.cm {
		cmNotifyBusy()
	}
	p.progress.Store(now)
	pq.stats.started.Add(1)
	if qa := w.queuedAt; qa != 0 {
		pq.stats.observeLatency(now - qa)
	}
	fn := w.fn
	if p.repatriate {
		wk.allow = p.cpus
	}
	// The color of this instance: a requeue while it runs recolors w.
	color := w.color
	p.mu.Unlock()

	if !wk.runItem(w, fn, pq, color) {
		return false
	}

	p.mu.Lock()
	wk.afterItem(pq, color)
	return true
}

// afterItem is the bookkeeping after an item. Called with pool.mu held.
func (wk *worker) afterItem(pq *pwq, color uint8) {
	p := wk.pool
	p.busy.Add(-1)
	p.progress.Store(nanotime())
	wk.current, wk.currentPwq = nil, nil
	wk.curPwq.Store(nil)
	wk.sleeping, wk.cpuIntensive = false, false
	if p.cm && !wk.counted && wk.rescuer == nil {
		wk.counted = true
		p.nrRunning++
	}
	if pq.complete(color) {
		p.mu.Unlock()
		pq.lim.scan(pq)
		p.mu.Lock()
	}
}

// runItem calls fn with panics recovered. It returns false if fn called
// runtime.Goexit; the worker has then left the pool.
func (wk *worker) runItem(w *Work, fn func(), pq *pwq, color uint8) (ok bool) {
	// execute_start is traced before PENDING is cleared, so that a requeue's
	// queue_work can never appear before this instance's execute_start.
	t := tracer.Load()
	if t != nil {
		(*t).Trace(&wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: wk.tid, Comm: wk.name, Work: w.addr(), Function: w.Func(), Workqueue: pq.wq.name})
	}
	s := w.startRun()
	// The thread's CPU clock was read at the end of its previous item (or
	// when it started) and does not advance while it is parked, so no
	// system call is needed here, on the latency path.
	if cpuAccounting.Load() {
		wk.cpuStart.Store(wk.lastCPU)
	}
	if p := wk.pool; p.repatriate {
		// Start inside the pod: if the scheduler left the worker outside
		// it, move it in (narrowing migrates it at once) and let it go again.
		if !p.podSet.Has(sched.GetCPU()) && sched.SetAffinity(0, p.pod) == nil {
			_ = sched.SetAffinity(0, wk.allow)
			pq.stats.repatriated.Add(1)
		}
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			pq.stats.panics.Add(1)
			reportPanic(PanicInfo{Workqueue: pq.wq.name, Func: w.Func(), Value: r, Stack: stackOf(), Worker: wk.name})
			wk.endItem(w, pq, s, t)
			ok = true
			return
		}
		// runtime.Goexit: the goroutine, and with it the locked thread,
		// ends after this function. Finish the item and leave the pool.
		wk.endItem(w, pq, s, t)
		p := wk.pool
		p.mu.Lock()
		wk.afterItem(pq, color)
		if wk.counted {
			wk.counted = false
			p.nrRunning--
		}
		p.removeWorker(wk)
		for !wk.scheduled.empty() {
			p.worklist.pushBack(wk.scheduled.popFront())
		}
		if !p.worklist.empty() && len(p.idle) == 0 {
			p.createWorker()
		}
		p.kick()
		p.mu.Unlock()
		reportError("process_one_work", w.Func(), fmt.Errorf("work function called runtime.Goexit; worker %s replaced", wk.name))
	}()
	fn()
	returned = true
	wk.endItem(w, pq, s, t)
	return true
}

func (wk *worker) endItem(w *Work, pq *pwq, s uint64, t *wqtrace.Tracer) {
	// Counted before flush waiters are released, so that they see it.
	end := nanotime()
	pq.stats.exec.observe(end - wk.currentAt)
	if c0 := wk.cpuStart.Load(); c0 >= 0 {
		wk.lastCPU = sched.SelfCPUTime()
		pq.stats.cpuTimeNs.Add(wk.lastCPU - c0)
	}
	pq.stats.completed.Add(1)
	if t != nil {
		(*t).Trace(&wqtrace.Event{Kind: wqtrace.ExecuteEnd, TimeNs: nanotime(), CPU: sched.GetCPU(), TID: wk.tid, Comm: wk.name, Work: w.addr(), Function: w.Func()})
	}
	w.finishRun(wk, s)
}

// workerInfo is a snapshot of one worker for dumps.
type workerInfo struct {
	Name, Func string
	TID        int
	Idle       bool
	RunningNs  int64
}

func (p *pool) snapshotWorkers() []workerInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := nanotime()
	out := make([]workerInfo, 0, len(p.workers))
	for _, wk := range p.workers {
		wi := workerInfo{Name: wk.name, TID: wk.tid, Idle: wk.idle}
		if wk.current != nil {
			wi.Func = wk.current.Func()
			wi.RunningNs = now - wk.currentAt
		}
		out = append(out, wi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// reserveP: see sched.ReserveP. Each RT pool reserves one P for its life.
func reserveP(n int) { sched.ReserveP(n) }
