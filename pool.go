package wq

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/topology"
)

// pool is a worker pool: a worklist of active items and the workers that
// run them (struct worker_pool).
//
// Lock key. Every shared field of pool, worker and Workqueue carries one
// of these tags, as struct worker_pool's fields do in kernel/workqueue.c:
//
//	I: set at creation (getPool, createWorker, Alloc), read-only after.
//	L: pool.mu held (for a worker: the lock of the pool it serves, or of
//	   the pool a rescuer is attached to). The policy functions
//	   (policy.go) read L: fields.
//	A: atomic; read without a lock. A comment says when it is written
//	   under a lock as well.
//	W: owned by the worker's goroutine: only it reads or writes the field.
//	M: owned by the CM monitor's goroutine (cm.go).
//	R: poolRegistry.mu held.
//	Q: Workqueue.mu held.
//	T: Workqueue.timerMu held (a leaf lock, taken after Work.mu).
//	F: Workqueue.flushMu held.
//	D: Workqueue.destroyMu held.
//	S: synchronises itself (a lock, a sync.WaitGroup, a parker, or a
//	   struct with its own lock).
//
// pool.mu also guards the list links of every Work on worklist or on the
// inactive list of a pwq of this pool.
//
// Lock order, outermost first; a lock is only taken while holding locks
// above it: attrMu, Workqueue.destroyMu, Workqueue.flushMu;
// Workqueue.mu; poolRegistry.mu; pool.mu (never two at once);
// Workqueue.statsMu (Stats takes the key shards' locks under it); a key
// shard's lock (one at a time); Work.mu (taken under a key shard's lock:
// doneUpTo); the leaves, which are taken last and under which nothing
// else is taken: Workqueue.timerMu, activeLimit.mu, the backpressure
// lock. The goroutine slots' lock (goAdm.mu, goadmit.go) is taken under
// pool.mu or under sched.ReserveP's lock (itself under poolRegistry.mu),
// and only the thread gate's lock under it: a slot waiter takes pool.mu
// with goAdm.mu released.
//
// Callbacks (user code) and the locks they run under:
//   - the tracer: activate_work under pool.mu (the only callback under a
//     gowq lock, delivered by whoever activates: a queuer, a worker, an
//     attribute change's scan); queue_work, execute_start and execute_end
//     under none;
//   - the stage recorder, the panic handler, the error handler: under
//     none (a report made with a lock held goes through goReport, on its
//     own goroutine);
//   - the logger: under none, except the log of a tracer's panic on
//     activate_work, under that pool.mu.
//
// So a call documented as safe from any tracer event must take only
// locks below pool.mu: Stats takes statsMu and the key shards' locks.
type pool struct {
	key  poolKey // I
	id   int     // I
	cpus []int   // L: CPUs workers may run on; set at creation, changed only on hotplug
	// I: non-strict unbound pools whose pod is narrower than the CPUs their
	// workers may use start each item inside the pod (repatriation, the
	// kernel's wake_cpu hint done by hand).
	repatriate bool
	mayspin    bool            // I: unbound and not RT: its workers may spin before parking (spinOK)
	pod        []int           // I: repatriate: the pod's CPUs
	podSet     topology.CPUSet // I: repatriate: the pod's CPUs

	mu            poolMutex            // S: the pool lock
	worklist      workList             // L
	workers       []*worker            // L
	idle          []*worker            // L: idle stack, most recent last
	nrRunning     int                  // L: workers counted as running (setCounted): running and not sleeping/CPU-intensive
	nrSpinning    int                  // L: workers spinning before parking (worker.spin)
	blocking      bool                 // L: unbound: a worker was seen blocked lately (concurrency)
	blockedAt     int64                // L: unbound: ns when the CM monitor last saw a worker blocked
	lastQueueCPU  int                  // L: unbound pools: CPU of the last queuer (spinOK, kick's wake_cpu hint)
	kickGen       atomic.Uint32        // A: bumped by every kick that finds work for a worker; spinners watch it
	spinHits      atomic.Int64         // A: spins that caught an item (Stats)
	spinMisses    atomic.Int64         // A: spins that ended with nothing to do
	incoming      atomic.Pointer[Work] // A: items queued lock-free, newest first (incoming.go)
	scanners      atomic.Int32         // A: workers between items, which drain incoming before they run or park
	nextID        int                  // L
	dead          bool                 // L
	disassociated bool                 // L: per-CPU pool whose CPU is offline
	idleTimer     *time.Timer          // L: created, reset and stopped under mu; its function (reapIdle) takes mu
	maydayTimer   *time.Timer          // L
	maydayArmed   bool                 // L
	// Worker creation failures (thread limits, attributes the kernel
	// refuses). While createFailing, the pool retries at the mayday
	// cadence instead of on every kick, and summons rescuers.
	createFailing bool  // L: the last creation failed; cleared by a worker that starts serving
	createErr     error // L: last worker creation error
	createErrs    int64 // L: creation failures since the pool was made
	createRepAt   int64 // L: ns of the last reported failure (rate limit)
	classErr      error // L: the class could not be applied exactly (kept the inherited nice); an Info notice, once per process
	// A: lock-free copies for Stats, which may be called from a tracer
	// while a pool lock is held.
	createErrN   atomic.Int64
	createErrMsg atomic.Pointer[string]
	classErrMsg  atomic.Pointer[string]
	// keptNice is the inherited nice the workers kept when the class's
	// could not be applied (valid once keptNiceSet), for Pools.
	keptNice    atomic.Int32
	keptNiceSet atomic.Bool

	refs     int            // R
	exited   sync.WaitGroup // S
	progress atomic.Int64   // A: ns of last item completion or pickup (watchdog)
	busy     atomic.Int32   // A: workers executing an item
	// A: the worklist may hold items of a queue with escape_after; the CM
	// monitor scans it (escape.go). Set under mu by activation, cleared
	// by the monitor's scan under mu.
	escWatch atomic.Bool
	// L: when escScan last looked past escScanMax (ns).
	escDeepAt int64
	// L: goroutine pools: workers waiting for a slot (goadmit.go).
	goWaiting int
	// A: a worker of this goroutine pool has waited for a slot at the
	// thread bound for a mayday interval: the rescuers may run its items.
	slotStarved atomic.Bool
}

// classAttrs is a worker class: scheduling policy, RT priority and nice.
type classAttrs struct {
	policy sched.Policy
	prio   int
	nice   int
}

func (c classAttrs) rt() bool { return c.policy == sched.PolicyFIFO || c.policy == sched.PolicyRR }

// suffix is the worker-name suffix of the class: "F" for SCHED_FIFO, "H"
// for nice < 0 (the kernel's "H" of a highpri kworker), "" otherwise.
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
	// goro: a goroutine-backed pool: the workers are goroutines, not
	// threads (gopool.go). Such a pool is not concurrency-managed: the CM
	// monitor does not sample it and its workers never count in
	// nrRunning, since they have no thread of their own to sample. The
	// one spelling of "goroutine-backed" in the code (the pool lock
	// copies it as poolMutex.goro).
	goro bool
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
		p = &pool{key: key, id: r.nextID, cpus: cpus, lastQueueCPU: -1,
			mayspin: key.cpu < 0 && !key.class.rt() && !key.goro}
		p.mu.pi = key.class.rt()
		p.mu.goro = key.goro
		p.mu.owner = p
		if key.cpu < 0 && !key.strict && key.pod != key.allow && !key.goro {
			if ps, err := topology.ParseList(key.pod); err == nil && !ps.IsEmpty() {
				p.repatriate, p.pod, p.podSet = true, ps.List(), ps
			}
		}
		r.nextID++
		p.progress.Store(nanotime())
		r.m[key] = p
		if !p.key.goro {
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
	if !p.key.goro {
		cmUnregister(p)
	}
	watchdogUnregister(p)
	if p.key.class.rt() {
		defer reserveP(-1)
	}
	p.mu.Lock()
	p.dead = true
	p.maydayArmed = false
	if p.idleTimer != nil {
		p.idleTimer.Stop()
	}
	if p.maydayTimer != nil {
		p.maydayTimer.Stop()
	}
	for _, wk := range p.workers {
		wk.dying = true
		wk.unpark()
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
		if p.key.goro {
			s += " goroutines"
		}
	}
	c := p.key.class
	if c.rt() {
		return s + " policy=" + c.policy.String() + " prio=" + strconv.Itoa(c.prio)
	}
	return s + " nice=" + strconv.Itoa(c.nice)
}

// kick wakes an idle worker if the pool needs one (kick_pool). With no
// idle worker it creates one, as the kernel's manager would; while
// creation keeps failing it leaves the retries to the mayday timer, which
// also summons the rescuers. Called with mu held.
func (p *pool) kick() {
	if lockdep {
		p.assertHeld()
	}
	if !p.needMoreWorker() {
		return
	}
	p.kickGen.Add(1)
	if p.spinnerTakes() {
		return
	}
	if n := len(p.idle); n > 0 {
		p.mu.wake = p.idle[p.wakeHint()]
		return
	}
	if p.createFailing {
		p.startMayday()
		return
	}
	p.createWorker()
}

// poolMutex is the pool lock. For an RT pool it is a priority-inheritance
// futex lock (sched.PIMutex): an ordinary thread that holds it (a queuer,
// a Go timer) while CPU hogs preempt it is boosted to the priority
// of an RT worker that waits for it, so the RT worker waits for the
// critical section only; and a contended wait sleeps in the kernel rather
// than parking the locked worker goroutine through the Go scheduler. It
// costs a gettid per Lock (a system call, 0.2-0.6 us on the machines we
// measured) except a worker's own (LockOn, with the tid it keeps), so the
// other classes, whose holders no RT thread waits for, use a plain futex
// lock (sched.Mutex): one compare-and-swap uncontended,
// a short spin and then a sleep in the kernel when contended. Not
// sync.Mutex: its contended path parks a locked worker goroutine through
// the Go scheduler (the thread sleeps, its P goes to another thread, and
// the Unlock must wake that thread and hand a P back), and the producer
// and the workers of a pool fed back to back contend all the time: with
// sync.Mutex an unbound queue runs about a third as many empty items per
// second (docs/decisions.md, "The non-RT pool lock is a futex lock").
//
// A worker woken while the lock is held is woken only by Unlock, after the
// lock is free: an RT worker woken inside the critical section would
// preempt the waker on its CPU and then block on the very lock the
// preempted waker holds.
type poolMutex struct {
	pi bool // immutable after the pool is made: use pm, not m
	m  sched.Mutex
	pm sched.PIMutex
	// goro: a goroutine-backed pool (poolKey.goro, gopool.go) uses gm,
	// whose contended path parks the goroutine and frees its thread, as
	// it should for a goroutine. Immutable after the pool is made.
	goro   bool
	gm     sync.Mutex
	gwaits atomic.Int64
	wake   *worker // guarded by the lock: worker to unpark at Unlock
	// held is the holder's goroutine in wqdebug builds (lockcheck_debug.go,
	// assertHeld); an empty struct otherwise.
	held lockOwner
	// owner is the pool whose incoming stack every Lock drains (nil in
	// tests that build a bare pool). Immutable.
	owner *pool
	// scan is a limit to scan after Unlock (drainIncoming). Guarded by
	// the lock.
	scan *activeLimit
}

func (pm *poolMutex) Lock() {
	if pm.goro {
		if !pm.gm.TryLock() {
			pm.gwaits.Add(1)
			pm.gm.Lock()
		}
	} else if pm.pi {
		pm.pm.Lock()
	} else {
		pm.m.Lock()
	}
	pm.held.set()
	if o := pm.owner; o != nil && o.incoming.Load() != nil {
		o.drainIncoming()
	}
}

// LockOn is Lock for a pool worker or rescuer on its own goroutine: c
// is its ThreadCheck, which saves an RT pool's lock the gettid system
// call while the worker is on its thread (sched.PIMutex.LockOn).
func (pm *poolMutex) LockOn(c *sched.ThreadCheck) {
	if !pm.pi || pm.goro {
		pm.Lock()
		return
	}
	pm.pm.LockOn(c)
	pm.held.set()
	if o := pm.owner; o != nil && o.incoming.Load() != nil {
		o.drainIncoming()
	}
}

// Waits returns how many Locks found the lock held.
func (pm *poolMutex) Waits() int64 {
	if pm.goro {
		return pm.gwaits.Load()
	}
	if pm.pi {
		return pm.pm.Waits.Load()
	}
	return pm.m.Waits.Load()
}

func (pm *poolMutex) Unlock() {
	wk := pm.wake
	pm.wake = nil
	scan := pm.scan
	pm.scan = nil
	pm.held.clear()
	if pm.goro {
		pm.gm.Unlock()
	} else if pm.pi {
		pm.pm.Unlock()
	} else {
		pm.m.Unlock()
	}
	if wk != nil {
		if stagesOn() {
			wk.unparkStamped() // stage timestamps (park.go)
		} else {
			wk.unpark()
		}
	}
	if scan != nil {
		scan.scan(nil)
	}
}

// createWorkerHook, when set (tests), is consulted before each worker
// creation; an error makes the creation fail (to exercise the rescuer).
var createWorkerHook atomic.Pointer[func() error]

// createWorker adds an idle worker with a token, so it starts serving as
// soon as its thread is set up; it does not wait for the thread. On failure
// (the thread gate's refusal near a thread limit, or the test hook) it records the error and arms the
// mayday timer. Called with mu held. Mirrors create_worker.
func (p *pool) createWorker() bool {
	if lockdep {
		p.assertHeld()
	}
	if p.dead {
		return false
	}
	if h := createWorkerHook.Load(); h != nil {
		if err := (*h)(); err != nil {
			p.createFailed(err)
			return false
		}
	}
	wk := &worker{pool: p, id: p.nextID, parkCPU: -1}
	p.nextID++
	// strconv, not fmt: a burst of blocking items on a cold goroutine
	// pool starts a worker per item, one after the other.
	switch {
	case p.key.cpu >= 0:
		wk.name = "kworker/" + strconv.Itoa(p.key.cpu) + ":" + strconv.Itoa(wk.id) + p.key.class.suffix()
	case p.key.goro:
		wk.name = "gworker/u" + strconv.Itoa(p.id) + ":" + strconv.Itoa(wk.id)
	case p.key.class.rt():
		wk.name = "kworker/u" + strconv.Itoa(p.id) + ":" + strconv.Itoa(wk.id) + "F"
	default:
		wk.name = "kworker/u" + strconv.Itoa(p.id) + ":" + strconv.Itoa(wk.id)
	}
	wk.curPool.Store(p)
	p.workers = append(p.workers, wk)
	wk.idle = true
	wk.lastActive = nanotime()
	p.idle = append(p.idle, wk)
	p.exited.Add(1)
	if p.key.goro {
		p.startGoWorker(wk) // a goroutine worker needs no thread of its own
		return true
	}
	wk.unpark()
	if err := goLocked(wk.main); err != nil {
		// The thread gate refused (a thread limit is near): undo the
		// linking; the pool retries at the mayday cadence.
		p.removeWorker(wk)
		p.exited.Done()
		p.createFailed(err)
		return false
	}
	return true
}

// createReportEvery rate-limits the report of repeated creation failures.
const createReportEvery = 10 * time.Second

// createFailed records a worker creation failure: the pool retries at the
// mayday cadence (with backoff) and summons rescuers while work waits. The
// first failure is reported at once, repeats at most every 10 s; all are
// counted (Stats().CreateErrors). Called with mu held.
func (p *pool) createFailed(err error) {
	if lockdep {
		p.assertHeld()
	}
	p.createFailing = true
	p.createErr = err
	p.createErrs++
	p.createErrN.Store(p.createErrs)
	msg := err.Error()
	p.createErrMsg.Store(&msg)
	now := nanotime()
	if p.createErrs == 1 || now-p.createRepAt >= int64(createReportEvery) {
		p.createRepAt = now
		n := p.createErrs
		name := p.String()
		goReport(func() {
			reportError("create_worker", name, fmt.Errorf("%w (%d failure(s) so far; retrying with backoff)", err, n))
		})
	}
	if p.needMoreWorker() {
		p.startMayday()
	}
}

// removeWorker unlinks wk from the pool's lists. Called with mu held.
func (p *pool) removeWorker(wk *worker) {
	if lockdep {
		p.assertHeld()
	}
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
		wk.unpark()
	}
}

// startMayday arms the mayday timer unless it is armed: if work stays
// stuck for lack of workers, creation is retried and rescuers are
// summoned (the kernel's pool_mayday_timeout). Called with mu held.
func (p *pool) startMayday() {
	if lockdep {
		p.assertHeld()
	}
	if p.maydayArmed || p.dead {
		return
	}
	p.maydayArmed = true
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

// maydayTimeout runs while a worker is needed and cannot be created: it
// retries the creation (the manager's retry, at MAYDAY_INTERVAL) and sends
// a mayday to the rescuer of every queue with items on the worklist. It
// re-arms itself until no worker is needed. Mirrors pool_mayday_timeout.
func (p *pool) maydayTimeout() {
	var wake []*worker
	p.mu.Lock()
	if p.dead || !p.maydayArmed {
		p.mu.Unlock()
		return
	}
	if !p.needToCreate() {
		p.maydayArmed = false
		p.mu.Unlock()
		return
	}
	p.createWorker()
	if p.needMoreWorker() {
		seen := map[*pwq]bool{}
		for w := p.worklist.head(); w != nil; w = w.next() {
			pq := w.pwq.Load()
			if pq == nil || seen[pq] {
				continue
			}
			seen[pq] = true
			if r := pq.wq.rescuer; r != nil {
				pq.stats.mayday.Add(1)
				if wk := r.mayday(pq); wk != nil {
					wake = append(wake, wk)
				}
			}
		}
	}
	p.maydayTimer.Reset(maydayInterval)
	pressure := p.createFailing && errors.Is(p.createErr, ErrThreadLimit)
	p.mu.Unlock()
	// Rescuers are woken after the pool lock is free: an RT rescuer woken
	// inside would preempt us and block on the lock (see poolMutex).
	for _, wk := range wake {
		wk.unpark()
	}
	if pressure {
		relieveThreadPressure(p)
	}
}

// relieveThreadPressure lets every idle worker of the other pools exit
// when p cannot create a worker because the process is at a thread limit:
// otherwise threads parked idle elsewhere (reaped only after 300 s) could
// starve p for good — one kept per pool is enough to starve a pool that
// has none. Those pools create workers again on demand. Called with no
// pool lock held; takes one pool lock at a time.
func relieveThreadPressure(p *pool) {
	r := &poolRegistry
	r.mu.Lock()
	others := make([]*pool, 0, len(r.m))
	for _, o := range r.m {
		if o != p {
			others = append(others, o)
		}
	}
	r.mu.Unlock()
	var exit []*worker
	for _, o := range others {
		o.mu.Lock()
		for !o.dead && len(o.idle) > 0 {
			wk := o.idle[0] // least recently active
			o.removeWorker(wk)
			wk.dying = true
			exit = append(exit, wk)
		}
		o.mu.Unlock()
	}
	// Woken after their pool locks are free (a dying worker that was also
	// just kicked passes the kick on in its loop).
	for _, wk := range exit {
		wk.unpark()
	}
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
