package wq

import (
	"testing"
)

// TestPushBouncedByDeadPwq: a push for a pwq that died under it (an
// attribute change or Destroy retired it after the queuer picked it) is
// not linked to the dead pwq but handed back to the queuer, which then
// takes the locked path and queues the item on the current pwq.
func TestPushBouncedByDeadPwq(t *testing.T) {
	q, err := Alloc("bounce", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	pq := q.table.Load().dfl
	p := pq.pool
	undo := fakeScanner(p)
	p.mu.Lock()
	pq.setDead(true)
	p.mu.Unlock()
	w, ran := pendedItem(t)
	if q.tryPush(cpuUnbound, pq, w) {
		t.Fatal("tryPush reported the item queued on a dead pwq")
	}
	if w.inPwq.Load() != nil || w.pwq.Load() != nil || w.bounced.Load() != 0 {
		t.Fatalf("bounced item left linked: inPwq %p pwq %p bounced %d", w.inPwq.Load(), w.pwq.Load(), w.bounced.Load())
	}
	if b := q.bounced.Load(); b != 1 {
		t.Errorf("bounced = %d, want 1", b)
	}
	// The queuer goes on the locked way: the pwq is alive again here (as
	// after an aborted retirement), so the item runs.
	p.mu.Lock()
	pq.setDead(false)
	p.mu.Unlock()
	undo()
	if !q.queuePendedFrom(cpuUnbound, w, admitNew) {
		t.Fatal("locked queue of the bounced item failed")
	}
	waitRan(t, ran, "the bounced item never ran")
}

// TestMarkDeadSeesPush: markPwqDead refuses to retire a pwq for which an
// item was pushed and not yet drained (the queuer may have seen the pwq
// alive, so it will not take the item back): it links the item instead,
// which then runs. Thread workers only: goroutine workers never scan, so
// nothing is pushed to their pools.
func TestMarkDeadSeesPush(t *testing.T) {
	q, err := Alloc("markdead", Unbound, 0, Threads())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	pq := q.table.Load().dfl
	p := pq.pool
	undo := fakeScanner(p)
	w, ran := pendedItem(t)
	// markPwqDead runs with the lock held; take it without the drain that
	// Lock does, and before the push (which takes no lock while a scanner
	// is present), as if the push came after that drain: any other holder
	// of the lock (a worker starting up) would drain the item first.
	p.mu.lockNoDrain()
	if !q.tryPush(cpuUnbound, pq, w) {
		p.mu.Unlock()
		t.Fatal("tryPush did not push with a scanner present")
	}
	if w.pwq.Load() != nil || p.incoming.Load() != w {
		p.mu.Unlock()
		t.Fatal("pushed item not waiting on the incoming stack")
	}
	dead := pq.markPwqDead(true)
	stillDead := pq.dead
	// Read under the lock: once it is free, a worker may take the item
	// (processOne clears w.pwq as it dequeues it).
	linked := w.pwq.Load() == pq
	p.mu.Unlock()
	if dead || stillDead {
		t.Fatalf("markPwqDead retired a pwq with a pushed item (returned %v, dead %v)", dead, stillDead)
	}
	if !linked {
		t.Fatal("the pushed item was not linked to its pwq")
	}
	undo()
	waitRan(t, ran, "the pushed item never ran")
}
