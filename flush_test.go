package wq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestFlushQueueFromOwnItem: Flush and Drain of a queue from one of its own
// items would wait for themselves; they return ErrDeadlock at once.
func TestFlushQueueFromOwnItem(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "selfflush", wq.Unbound, 0)
	got := make(chan [2]error, 1)
	w := wq.NewWork(func() {
		got <- [2]error{q.FlushContext(t.Context()), q.DrainContext(t.Context())}
	})
	q.Queue(w)
	select {
	case r := <-got:
		for _, err := range r {
			if !errors.Is(err, wq.ErrDeadlock) {
				t.Errorf("flush/drain from own item = %v, want ErrDeadlock", err)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Flush from the queue's own item hung")
	}
	q.Flush()
	if errs.count(wq.ErrDeadlock) != 2 {
		t.Errorf("ErrDeadlock reported %d times, want 2", errs.count(wq.ErrDeadlock))
	}
	if err := wq.SetGlobalAttr("cpumask", "0"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf(`SetGlobalAttr("cpumask", "0") = %v, want ErrInvalidArgument`, err)
	}
}
