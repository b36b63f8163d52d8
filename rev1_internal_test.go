package wq

import (
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
