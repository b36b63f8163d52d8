package wq

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCancelGoItemEndsGroupAndFuture catches a Group.Wait or Future.Wait
// that hangs when a path that cancels queued items (CancelPending) drops
// a Group or Future item without calling cancelGoItem's contract: the
// test cancels such items the way that path does (grab, markCancelled,
// release) and calls cancelGoItem.
func TestCancelGoItemEndsGroupAndFuture(t *testing.T) {
	q, err := Alloc("cancel-goitem", Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	release := make(chan struct{})
	started := make(chan struct{})
	if err := q.Go(func() { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started // max_active 1: what is queued now waits

	grp, _ := q.NewGroup(context.Background())
	grp.Go(func(context.Context) error { t.Error("a cancelled group function ran"); return nil })
	f := Submit(q, context.Background(), func(context.Context) (int, error) { t.Error("a cancelled future ran"); return 0, nil })

	// Find the two goItems on the inactive list and cancel them.
	var items []*Work
	q.mu.Lock()
	pwqs := append([]*pwq(nil), q.allPwqs...)
	q.mu.Unlock()
	for _, pq := range pwqs {
		pq.pool.mu.Lock()
		for w := pq.inactive.head(); w != nil; w = w.next() {
			items = append(items, w)
		}
		pq.pool.mu.Unlock()
	}
	if len(items) != 2 {
		t.Fatalf("%d items on the inactive list, want 2", len(items))
	}
	for _, w := range items {
		if !w.Cancel() {
			t.Fatal("Cancel of a queued goItem = false")
		}
		cancelGoItem(w)
	}
	close(release)
	done := make(chan error, 1)
	go func() { done <- grp.Wait() }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCancelled) {
			t.Errorf("Group.Wait = %v, want ErrCancelled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Group.Wait hangs after its function was cancelled")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, ErrCancelled) {
		t.Errorf("Future.Wait = %v, want ErrCancelled", err)
	}
}
