package wq_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestOrderedAcrossAttrChanges: an ordered queue keeps queue order and
// finishes while its attributes change under load (the stranger's F1), and
// retired pwqs are released rather than piling up.
func TestOrderedAcrossAttrChanges(t *testing.T) {
	q, err := wq.AllocOrdered("ord-attr", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	const n = 5000
	var last, bad atomic.Int64
	last.Store(-1)
	works := make([]*wq.Work, n)
	for i := range works {
		k := int64(i)
		works[i] = wq.NewWork(func() {
			if last.Load() != k-1 {
				bad.Add(1)
			}
			last.Store(k)
		})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	var changes atomic.Int64
	go func() {
		defer close(done)
		masks := []string{"1", "3"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = q.SetAttr("cpumask", masks[i%2])
			changes.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	for _, w := range works {
		if !q.Queue(w) {
			t.Fatal("Queue returned false")
		}
	}
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(60 * time.Second):
		t.Fatalf("Flush did not return; ran up to %d of %d", last.Load(), n)
	}
	close(stop)
	<-done
	if b := bad.Load(); b != 0 {
		t.Errorf("%d of %d items ran out of order across %d attribute changes", b, n, changes.Load())
	}
	if last.Load() != n-1 {
		t.Errorf("last item run %d, want %d", last.Load(), n-1)
	}
	if got := q.Stats().Total; got != n {
		t.Errorf("Stats().Total = %d, want %d (retired pwqs' counters kept)", got, n)
	}
	if pools := len(q.PoolIDs()); pools == 0 {
		t.Error("no pools")
	}
	// Retired pwqs that still held items at the last change are released
	// by the next one, now that everything has run.
	if err := q.SetAttr("cpumask", "3"); err != nil {
		t.Fatal(err)
	}
	if live := q.NumPwqs(); live > 1 {
		t.Errorf("%d pwqs still held after %d attribute changes; retired ones must be released", live, changes.Load())
	}
}
