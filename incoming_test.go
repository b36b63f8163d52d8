package wq_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gowq/wq"
)

// TestLockFreeQueueAccounting: while workers are between items, queue
// calls push items onto the pool without its lock (incoming.go). Two
// producers queue a small set of items back to back, a third goroutine
// cancels them at random, and (unbound) the queue's attributes change
// under them, which retires pwqs that pushes may still target. Every
// Queue that returned true must end in exactly one run or one Cancel that
// returned true; nothing is lost or run twice. The pool must have taken
// the lock-free path (Pushed > 0), or the test would not test it.
func TestLockFreeQueueAccounting(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
		nice  int
		attrs bool
	}{
		{"percpu", wq.PerCPU, 0, false},
		{"unbound", wq.Unbound, 3, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Threads: goroutine-backed pools (a niced process's unbound
			// queue at the process's nice) never take the lock-free path.
			q := mustAlloc(t, "lockfree-"+c.name, c.flags, 0, wq.Threads())
			if c.attrs {
				// A niced unprivileged process may not set nice 3.
				c.nice = reachableNice(t, c.nice)
				if err := q.SetNice(c.nice); err != nil {
					t.Fatal(err)
				}
			}
			const nItems, perProducer = 16, 20000
			var queued, cancelled, ran [nItems]atomic.Int64
			items := make([]*wq.Work, nItems)
			for i := range items {
				items[i] = wq.NewWork(func() { ran[i].Add(1) })
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j, n := 0, 0; n < perProducer; j++ {
						i := j % nItems
						if q.Queue(items[i]) {
							queued[i].Add(1)
							n++
						}
					}
				}()
			}
			var aux sync.WaitGroup
			aux.Add(1)
			go func() {
				defer aux.Done()
				r := rand.New(rand.NewPCG(1, 2))
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					i := r.IntN(nItems)
					if items[i].Cancel() {
						cancelled[i].Add(1)
					}
					if c.attrs && n%500 == 0 {
						// New pwqs; the old ones retire once empty.
						next := c.nice + 1 + n/500%2
						if next > 19 {
							// Niced unprivileged: 19 and 0 are the
							// reachable values.
							next = n / 500 % 2 * c.nice
						}
						_ = q.SetNice(next)
					}
				}
			}()
			wg.Wait()
			close(stop)
			aux.Wait()
			q.Flush()
			st := q.Stats()
			pushed, bounced := st.Pushed, st.Bounced
			for i := range items {
				if items[i].Pending() {
					t.Errorf("item %d still pending after Flush", i)
				}
				if got, want := ran[i].Load()+cancelled[i].Load(), queued[i].Load(); got != want {
					t.Errorf("item %d: queued %d times, ran %d and cancelled %d (sum %d)", i, want, ran[i].Load(), cancelled[i].Load(), got)
				}
			}
			// A per-CPU worker shares its CPU with the producer there, which
			// it preempts: few pushes, maybe none. Unbound: thousands.
			if pushed == 0 && c.attrs {
				t.Errorf("no queue call took the lock-free path (Stats().Pushed = 0)")
			}
			t.Logf("pushed %d (bounced %d)", pushed, bounced)
		})
	}
}
