package wq

import (
	"testing"
)

// TestBouncedPushIsCounted: a push bounced by a pwq that an attribute
// change retired is counted in Stats (Pushed and Bounced). It failed when
// the counters lived on the pwq: the retired pwq's counters had already
// been folded into the queue's (retireIdle) when the queuer added to them.
func TestBouncedPushIsCounted(t *testing.T) {
	q, err := Alloc("bounce-counted", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	old := q.table.Load().dfl
	undo := fakeScanner(old.pool)
	setPoolNice(t, q, 5) // a new pwq; the idle old one retires
	old.pool.mu.Lock()
	dead := old.dead
	old.pool.mu.Unlock()
	if !dead {
		t.Fatal("the attribute change did not retire the old pwq")
	}
	w, ran := pendedItem(t)
	if q.tryPush(cpuUnbound, old, w) {
		t.Fatal("tryPush reported the item queued on a retired pwq")
	}
	undo()
	if !q.queuePendedFrom(cpuUnbound, w, admitNew) {
		t.Fatal("locked queue of the bounced item failed")
	}
	waitRan(t, ran, "the bounced item never ran")
	if st := q.Stats(); st.Bounced != 1 || st.Pushed < 1 {
		t.Errorf("Stats: Pushed %d, Bounced %d; want Bounced 1 and Pushed >= 1", st.Pushed, st.Bounced)
	}
}
