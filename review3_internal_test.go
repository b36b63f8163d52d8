package wq

import (
	"sync"
	"testing"
	"time"
)

// escMin must end as the shortest escape_after of the live queues after
// concurrent SetEscapeAfter calls on different queues: each call
// recomputed it from the queues and stored the result, so a call that
// read the queues first could store last (a lost update) and leave escMin
// 0 or too long while an escape queue is live (the monitor then sleeps
// past its items).
func TestReview3EscMinConcurrentSet(t *testing.T) {
	q1, err := Alloc("rev3-min1", PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Destroy()
	q2, err := Alloc("rev3-min2", PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Destroy()
	defer func() { _ = q1.SetEscapeAfter(0); _ = q2.SetEscapeAfter(0) }()
	for i := range 50000 {
		var wg sync.WaitGroup
		d1 := time.Duration(i%2) * 50 * time.Microsecond // 0 or 50us
		d2 := time.Duration(1-i%2) * 70 * time.Microsecond
		wg.Add(2)
		go func() { defer wg.Done(); _ = q1.SetEscapeAfter(d1) }()
		go func() { defer wg.Done(); _ = q2.SetEscapeAfter(d2) }()
		wg.Wait()
		want := int64(max(d1, d2)) // one of them is 0
		if got := escMin.Load(); got != want {
			t.Fatalf("round %d: escMin %v after SetEscapeAfter(%v) and (%v) on two queues, want %v",
				i, time.Duration(got), d1, d2, time.Duration(want))
		}
	}
}
