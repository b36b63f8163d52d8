package wq

import (
	"sync"
	"testing"
	"time"
)

// TestSleepBeforeFnIsNotBlocked: a worker's thread seen asleep just before
// its work function (in the pool lock of scanOff, or Work.mu in startRun)
// whose function has started by the time the CM monitor reads inFn is not
// a blocked item: that sleep was outside fn, and the thread now runs fn.
// It failed when cmSample read inFn only after the state (it took the
// lock wait for a blocked item and woke a second worker of a per-CPU pool
// while the first ran). cmStateHook, between the two reads, plays the
// worker starting fn.
func TestSleepBeforeFnIsNotBlocked(t *testing.T) {
	tid, release := sleepingThread(t)
	defer release()
	p := &pool{key: poolKey{cpu: 0}, cpus: []int{0}}
	p.busy.Store(1)
	pq := &pwq{pool: p}
	wk := &worker{pool: p, tid: tid, gen: 1, current: NewWork(func() {}), currentPwq: pq, counted: true, currentAt: nanotime()}
	spare := &worker{pool: p}
	p.workers = []*worker{wk, spare}
	p.idle = []*worker{spare}
	spare.idle = true
	p.nrRunning = 1
	p.worklist.pushBack(NewWork(func() {})) // work pending behind it
	h := func() { wk.inFn.Store(true) }     // fn starts after the state read
	cmStateHook.Store(&h)
	defer cmStateHook.Store(nil)
	stats := map[int]*statEntry{}
	_, _, sawSleep := p.cmSample(nanotime(), nil, stats, 1, true)
	for _, e := range stats {
		_ = e.r.Close()
	}
	p.mu.wake = nil
	if sawSleep || wk.sleeping || !wk.counted || p.nrRunning != 1 || pq.stats.cmWakeups.Load() != 0 {
		t.Errorf("asleep before fn, in fn at the inFn read: sawSleep %v sleeping %v counted %v nr_running %d CMW %d; want it still running",
			sawSleep, wk.sleeping, wk.counted, p.nrRunning, pq.stats.cmWakeups.Load())
	}
}

// TestUnboundBlockingHoldExpiresWhileIdle: an unbound pool is unlimited only
// until unboundBlockingHold passes with no worker seen blocked
// (pool.concurrency). The hold is ended only by cmSample, which samples
// busy pools only: a pool that went idle while blocking stayed unlimited
// until the first sample of its next busy period, so the next burst of
// CPU-bound items woke a worker per item (each kick woke another). (Failed
// before the fix: concurrency() was MaxInt32 a second after the last
// sighting.)
func TestUnboundBlockingHoldExpiresWhileIdle(t *testing.T) {
	p := &pool{key: poolKey{cpu: -1}, cpus: []int{0, 1}}
	p.mu.Lock() // a bare pool, never unlocked: the policy functions assert the lock (wqdebug)
	p.blocking = true
	p.blockedAt = nanotime() - int64(time.Second)
	if c := p.concurrency(); c != 2 {
		t.Errorf("1 s after the last blocked worker was seen, concurrency = %d, want 2 (the pool's CPUs)", c)
	}
	// The consequence: with two workers running CPU-bound items, a kick
	// wakes a third.
	idle := &worker{pool: p}
	p.idle = []*worker{idle}
	p.worklist.pushBack(NewWork(func() {}))
	p.nrRunning = 2
	p.kick()
	if p.mu.wake != nil {
		t.Errorf("kick woke a third worker for a pool of 2 CPUs whose blocking hold ended 1 s ago")
	}
	// Within the hold it stays unlimited.
	p.mu.wake = nil
	p.blocking = true
	p.blockedAt = nanotime()
	if c := p.concurrency(); c <= 2 {
		t.Errorf("within the hold, concurrency = %d, want unlimited", c)
	}
}

// TestMonitorDeepIdleSeesNewPool: the CM monitor, going into deep
// idle, re-checks after publishing cmMon.idle that no pool became busy
// meanwhile, but only among the pools of its last snapshot. A pool
// registered after the snapshot whose worker starts an item before idle is
// published calls cmNotifyBusy while the monitor is not yet idle (no
// send), and is not re-checked: the monitor sleeps until another pool
// becomes busy, and a blocked worker of that pool is never seen, so the
// items behind it wait (a lost wake-up; since today also for unbound
// pools, which the kernel never holds back). The hook makes the window
// deterministic. (Failed before the fix.)
func TestMonitorDeepIdleSeesNewPool(t *testing.T) {
	p1 := &pool{key: poolKey{cpu: -1}}
	p2 := &pool{key: poolKey{cpu: -1}}
	fired := make(chan struct{})
	var once sync.Once
	h := func() {
		once.Do(func() {
			cmRegister(p2)
			if p2.busy.Add(1) == 1 { // a worker of p2 starts an item
				cmNotifyBusy()
			}
			close(fired)
		})
	}
	cmDeepIdleHook.Store(&h)
	cmRegister(p1) // starts the monitor if none runs
	defer func() {
		cmDeepIdleHook.Store(nil)
		p2.busy.Store(0)
		cmUnregister(p2)
		cmUnregister(p1)
	}()
	select {
	case <-fired:
	case <-time.After(5 * time.Second):
		t.Skip("the CM monitor did not go into deep idle (other pools busy)")
	}
	_, all0 := cmPolls.fast.Load(), cmPolls.all.Load()
	deadline := time.Now().Add(2 * time.Second)
	for cmPolls.all.Load() == all0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if cmPolls.all.Load() == all0 {
		t.Errorf("pool busy since before the monitor went idle, but the monitor took no sample in 2 s (idle=%v)", cmMon.idle.Load())
	}
}

// TestCMIgnoresSleepOutsideFn: the CM monitor counts a worker whose thread
// sleeps as blocked only while the thread runs a work function. A worker
// asleep in its own wait for the pool lock (a futex sleep, state S, like a
// blocked item's) keeps counting as running, as a kernel worker spinning
// on pool->lock would: taking it for blocked made an unbound pool fed back
// to back lift its concurrency limit and make a worker per lock wait. The
// same sleeping thread inside fn is seen as blocked (the test's control).
func TestCMIgnoresSleepOutsideFn(t *testing.T) {
	// A thread asleep in futex_wait on a held lock, standing for the
	// worker's thread.
	tid, release := sleepingThread(t)
	defer release()

	for _, inFn := range []bool{false, true} {
		p := &pool{key: poolKey{cpu: -1}, cpus: []int{0, 1}}
		p.busy.Store(1)
		pq := &pwq{pool: p}
		wk := &worker{pool: p, tid: tid, gen: 1, current: NewWork(func() {}), currentPwq: pq, counted: true, currentAt: nanotime()}
		wk.inFn.Store(inFn)
		spare := &worker{pool: p}
		p.workers = []*worker{wk, spare}
		p.idle = []*worker{spare}
		spare.idle = true
		p.nrRunning = 1
		p.worklist.pushBack(NewWork(func() {})) // work pending behind it
		stats := map[int]*statEntry{}
		_, _, sawSleep := p.cmSample(nanotime(), nil, stats, 1, true)
		for _, e := range stats {
			_ = e.r.Close()
		}
		p.mu.wake = nil
		if inFn {
			if !sawSleep || !wk.sleeping || wk.counted || p.nrRunning != 0 || pq.stats.cmWakeups.Load() != 1 {
				t.Errorf("asleep inside fn: sawSleep %v sleeping %v counted %v nr_running %d CMW %d; want a blocked worker, not counted, and a CM wake-up",
					sawSleep, wk.sleeping, wk.counted, p.nrRunning, pq.stats.cmWakeups.Load())
			}
			continue
		}
		if sawSleep || wk.sleeping || !wk.counted || p.nrRunning != 1 || pq.stats.cmWakeups.Load() != 0 {
			t.Errorf("asleep outside fn (pool lock wait): sawSleep %v sleeping %v counted %v nr_running %d CMW %d; want it still running",
				sawSleep, wk.sleeping, wk.counted, p.nrRunning, pq.stats.cmWakeups.Load())
		}
	}
}
