package wq

import (
	"sync"
	"testing"
	"time"
)

// TestRev1BlockingExpiresWhileIdle: an unbound pool is unlimited only
// until unboundBlockingHold passes with no worker seen blocked
// (pool.concurrency). The hold is ended only by cmSample, which samples
// busy pools only: a pool that went idle while blocking stayed unlimited
// until the first sample of its next busy period, so the next burst of
// CPU-bound items woke a worker per item (each kick woke another). (Failed
// before the fix: concurrency() was MaxInt32 a second after the last
// sighting.)
func TestRev1BlockingExpiresWhileIdle(t *testing.T) {
	p := &pool{key: poolKey{cpu: -1}, cm: true, cpus: []int{0, 1}}
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

// TestRev1MonitorDeepIdleSeesNewPool: the CM monitor, going into deep
// idle, re-checks after publishing cmMon.idle that no pool became busy
// meanwhile, but only among the pools of its last snapshot. A pool
// registered after the snapshot whose worker starts an item before idle is
// published calls cmNotifyBusy while the monitor is not yet idle (no
// send), and is not re-checked: the monitor sleeps until another pool
// becomes busy, and a blocked worker of that pool is never seen, so the
// items behind it wait (a lost wake-up; since today also for unbound
// pools, which the kernel never holds back). The hook makes the window
// deterministic. (Failed before the fix.)
func TestRev1MonitorDeepIdleSeesNewPool(t *testing.T) {
	p1 := &pool{key: poolKey{cpu: -1}, cm: true}
	p2 := &pool{key: poolKey{cpu: -1}, cm: true}
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
