package wq

import (
	"testing"
)

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
		p := &pool{key: poolKey{cpu: -1}, cm: true, cpus: []int{0, 1}}
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
