package wq

import (
	"errors"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestKickWithSpinner: with a worker spinning, a kick that finds work
// wakes nobody and bumps the kick generation the spinner watches; with
// none, it picks the idle worker to wake at unlock.
func TestKickWithSpinner(t *testing.T) {
	p := &pool{key: poolKey{cpu: -1}, mayspin: true, cpus: []int{0, 1}}
	p.mu.Lock() // a bare pool, never unlocked: the policy functions assert the lock (wqdebug)
	idle := &worker{pool: p}
	p.idle = []*worker{idle}
	p.worklist.pushBack(NewWork(func() {}))
	p.nrSpinning = 1
	g0 := p.kickGen.Load()
	p.kick()
	if p.mu.wake != nil {
		t.Errorf("kick chose a worker to wake while one spins")
	}
	if p.kickGen.Load() == g0 {
		t.Errorf("kick did not bump the generation the spinner watches")
	}
	p.nrSpinning = 0
	p.kick()
	if p.mu.wake != idle {
		t.Errorf("kick with no spinner chose %v, want the idle worker", p.mu.wake)
	}
	// Concurrency management: an unbound pool of two CPUs wants no third
	// running worker.
	p.mu.wake = nil
	p.nrRunning = 2
	p.kick()
	if p.mu.wake != nil {
		t.Errorf("kick woke a worker with as many running as the pool has CPUs")
	}
	// Once a worker was seen blocked, the unbound pool runs every pending
	// item at once, as the kernel's unbound pools do.
	p.blocking, p.blockedAt = true, nanotime()
	p.kick()
	if p.mu.wake != idle {
		t.Errorf("kick of a blocking unbound pool did not wake the idle worker")
	}
}

// TestPoolMutexWaits: a Lock that finds the pool lock held is counted, in
// both kinds of pool lock.
func TestPoolMutexWaits(t *testing.T) {
	for _, pi := range []bool{false, true} {
		var pm poolMutex
		pm.pi = pi
		pm.Lock()
		done := make(chan struct{})
		go func() {
			pm.Lock()
			pm.Unlock()
			close(done)
		}()
		for pm.Waits() == 0 {
			runtime.Gosched()
		}
		pm.Unlock()
		<-done
		if w := pm.Waits(); w != 1 {
			t.Errorf("pi=%v: Waits = %d, want 1", pi, w)
		}
	}
}

// A pool whose workers kept the inherited nice (unprivileged under
// nice -n 19) shows that nice in Pools(), with the class's as AskedNice.
// Catches: Pools() reporting the class's nice 0 while the threads run at 19.
func TestPoolsShowKeptInheritedNice(t *testing.T) {
	q, err := Alloc("keptnice", Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	id := q.PoolIDs()[0]
	var p *pool
	poolRegistry.mu.Lock()
	for _, pp := range poolRegistry.m {
		if pp.id == id {
			p = pp
		}
	}
	poolRegistry.mu.Unlock()
	if p == nil {
		t.Fatalf("pool %d of the queue not registered", id)
	}
	if p.key.class.nice != 0 {
		t.Skipf("the default unbound pool has nice %d here, not the normal class's 0", p.key.class.nice)
	}
	if !p.keptNiceSet.Load() {
		// Simulate what setup records when the process may not lower its
		// nice; undo it so that other tests see the pool as it was.
		defer func() {
			p.mu.Lock()
			p.classErr = nil
			p.mu.Unlock()
			p.classErrMsg.Store(nil)
			p.keptNiceSet.Store(false)
		}()
		p.keepInheritedNice(19, errors.New("simulated: operation not permitted"))
	}
	for _, pi := range Pools() {
		if pi.ID != id {
			continue
		}
		if pi.Nice != 19 || pi.AskedNice != 0 {
			t.Fatalf("pool %d: Nice %d AskedNice %d, want 19 (the kept inherited nice) and 0", id, pi.Nice, pi.AskedNice)
		}
		return
	}
	t.Fatalf("pool %d not in Pools()", id)
}

// TestHugeIdleTimeoutReapsNothing catches an idle reaper that compares a
// wrapped deadline (lastActive plus an idle timeout near math.MaxInt64)
// with now, and so reaps every surplus idle worker at once.
func TestHugeIdleTimeoutReapsNothing(t *testing.T) {
	old := time.Duration(idleTimeout.Load())
	t.Cleanup(func() { _ = SetIdleTimeout(old) })
	q, err := Alloc("idle-huge", Unbound, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	// Six items that block together need six workers; once they end,
	// the pool has more idle workers than it keeps.
	const n = 6
	var started sync.WaitGroup
	started.Add(n)
	release := make(chan struct{})
	for range n {
		q.Queue(NewWork(func() { started.Done(); <-release }))
	}
	started.Wait()
	close(release)
	q.Flush()
	p := q.table.Load().dfl.pool
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1<<63 - 1<<40} {
		if err := SetIdleTimeout(d); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		before := len(p.workers)
		p.mu.Unlock()
		if before < 3 {
			t.Fatalf("pool has %d workers, want at least 3 for the reaper to consider", before)
		}
		p.reapIdle() // as the idle timer does when it fires
		p.mu.Lock()
		after := len(p.workers)
		p.mu.Unlock()
		if after != before {
			t.Errorf("idle timeout %d: the reaper removed %d of %d workers at once", int64(d), before-after, before)
		}
	}
}
