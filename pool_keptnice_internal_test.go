package wq

import (
	"errors"
	"testing"
)

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
