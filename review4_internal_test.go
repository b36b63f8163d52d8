package wq

import (
	"testing"
	"time"
)

// TestReview4BouncedPushCounted: a push bounced by a pwq that an attribute
// change retired is counted in Stats (Pushed and Bounced). It failed when
// the counters lived on the pwq: the retired pwq's counters had already
// been folded into the queue's (retireIdle) when the queuer added to them.
func TestReview4BouncedPushCounted(t *testing.T) {
	q, err := Alloc("review4-bounce", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	old := q.table.Load().dfl
	undo := fakeScanner(old.pool)
	if err := q.SetNice(5); err != nil { // a new pwq; the idle old one retires
		t.Fatal(err)
	}
	old.pool.mu.Lock()
	dead := old.dead
	old.pool.mu.Unlock()
	if !dead {
		t.Fatal("the attribute change did not retire the old pwq")
	}
	ran := make(chan struct{}, 1)
	w := NewWork(func() { ran <- struct{}{} })
	if !w.tryPend() {
		t.Fatal("tryPend failed on a new item")
	}
	if q.tryPush(cpuUnbound, old, w) {
		t.Fatal("tryPush reported the item queued on a retired pwq")
	}
	undo()
	if !q.queuePended(cpuUnbound, w) {
		t.Fatal("locked queue of the bounced item failed")
	}
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the bounced item never ran")
	}
	if st := q.Stats(); st.Bounced != 1 || st.Pushed < 1 {
		t.Errorf("Stats: Pushed %d, Bounced %d; want Bounced 1 and Pushed >= 1", st.Pushed, st.Bounced)
	}
}
