package wq

import (
	"errors"
	"testing"
)

// TestTakeRefusedElsewhereTakesNothing: while w runs on queue B (its
// runner is a worker serving B's pwq), the two ways a new instance for
// queue A takes PENDING refuse without taking it: pendOn (Queue,
// QueueErr, QueueKeyed, QueueDelayed, QueueContext) returns
// ErrOtherQueue, and ModDelayed's grab of the idle item (grabFrom with
// A) returns grabElsewhere; the state word is unchanged by both. For B
// itself both take it. The runner is set by hand: the window in which
// ModDelayed's first check passes and the item starts on B before its
// grab cannot be opened from outside. Catches a take that set PENDING
// before it refused: a Queue of the item elsewhere meanwhile returned
// false (already pending) and its run was lost when the refusal
// released the item (TestSelfRequeueKeptWhileRefusedElsewhere).
func TestTakeRefusedElsewhereTakesNothing(t *testing.T) {
	a, err := Alloc("take-a", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy()
	b, err := Alloc("take-b", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	dw := NewDelayedWork(func() {})
	w := &dw.Work
	wk := &worker{}
	wk.curPwq.Store(b.table.Load().dfl)
	w.runner.Store(wk)
	defer w.runner.Store(nil)

	before := w.state.Load()
	if err := w.pendOn(a); !errors.Is(err, ErrOtherQueue) {
		t.Errorf("pendOn(A) while the item runs on B = %v, want ErrOtherQueue", err)
		if err == nil {
			w.markCancelled()
			w.release()
		}
	}
	if st := w.state.Load(); st != before {
		t.Errorf("pendOn(A) changed the state from %#x to %#x", before, st)
	}
	if r, _ := w.grabFrom(a); r != grabElsewhere {
		t.Errorf("grabFrom(A) of the idle item while it runs on B = %d, want grabElsewhere (%d)", r, grabElsewhere)
		if r == grabIdle || r == grabPending {
			w.markCancelled()
			w.release()
		}
	}
	if st := w.state.Load(); st != before {
		t.Errorf("grabFrom(A) changed the state from %#x to %#x", before, st)
	}

	// On B itself (a requeue while it runs there) both take PENDING.
	if err := w.pendOn(b); err != nil {
		t.Errorf("pendOn(B) while the item runs on B = %v, want nil", err)
	} else {
		w.markCancelled()
		w.release()
	}
	if r, _ := w.grabFrom(b); r != grabIdle {
		t.Errorf("grabFrom(B) of the idle item while it runs on B = %d, want grabIdle (%d)", r, grabIdle)
	} else {
		w.markCancelled()
		w.release()
	}
}
