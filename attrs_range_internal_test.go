package wq

import (
	"math"
	"sync"
	"testing"
	"time"
)

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
