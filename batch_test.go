package wq_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/wqtrace"
)

// QueueBatch queues every item once: the count is the number of items
// accepted, a Work given twice and a pending or disabled one are skipped,
// nil items are refused with ErrNoFunc, and every accepted item runs
// exactly once. Catches a batch that drops, duplicates or miscounts items.
func TestQueueBatchSemantics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   wq.Flags
		opts    []wq.Option
		ordered bool
	}{
		{"percpu", wq.PerCPU, nil, false},
		{"unbound", wq.Unbound, nil, false},
		{"unbound-threads", wq.Unbound, []wq.Option{wq.Threads()}, false},
		{"ordered", 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := captureErrors(t)
			var q *wq.Workqueue
			if tc.ordered {
				var err error
				if q, err = wq.AllocOrdered("batch-"+tc.name, 0, tc.opts...); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(q.Destroy)
			} else {
				q = mustAlloc(t, "batch-"+tc.name, tc.flags, 0, tc.opts...)
			}
			const n = 100
			runs := make([]atomic.Int32, n)
			gate := make(chan struct{})
			var gateOnce sync.Once
			open := func() { gateOnce.Do(func() { close(gate) }) }
			defer open() // a failed check must not leave items blocked
			items := make([]*wq.Work, n)
			for i := range items {
				items[i] = wq.NewWork(func() {
					<-gate
					runs[i].Add(1)
				})
			}
			disabled := wq.NewWork(func() { t.Error("a disabled item ran") })
			disabled.Disable()
			// items[n-1] twice in a row: the second is pending (no worker
			// can have started it yet... or it has, and then it runs again,
			// as a requeue of a running item does); items[0] again at the
			// end, likewise. Whatever the timing, every accepted item runs
			// once per acceptance.
			batch := append([]*wq.Work{}, items...)
			batch = append(batch, items[n-1], items[0], nil, disabled)
			got := q.QueueBatch(batch...)
			if got < n || got > n+2 {
				t.Fatalf("QueueBatch = %d, want %d to %d", got, n, n+2)
			}
			open()
			q.Flush()
			total := 0
			for i := range runs {
				r := int(runs[i].Load())
				if r < 1 {
					t.Fatalf("item %d did not run", i)
				}
				total += r
			}
			if total != got {
				t.Fatalf("%d runs for %d accepted items", total, got)
			}
			// Pending items are skipped: a batch of the same item five
			// times queues it once while it waits behind a blocked one.
			block := make(chan struct{})
			blocker := wq.NewWork(func() { <-block })
			var again atomic.Int32
			w := wq.NewWork(func() { again.Add(1) })
			if tc.ordered {
				q.Queue(blocker)
				if got := q.QueueBatch(w, w, w, w, w); got != 1 {
					t.Errorf("QueueBatch of one item five times behind a blocked ordered item = %d, want 1", got)
				}
			} else {
				w.Disable() // held idle: none of the five is queued
				if got := q.QueueBatch(w, w, w, w, w); got != 0 {
					t.Errorf("QueueBatch of a disabled item = %d, want 0", got)
				}
				w.Enable()
			}
			close(block)
			q.Flush()
			errs.mu.Lock()
			noFunc := 0
			for _, e := range errs.errs {
				if errors.Is(e, wq.ErrNoFunc) {
					noFunc++
				}
			}
			errs.mu.Unlock()
			if noFunc != 1 {
				t.Errorf("%d ErrNoFunc reports for one nil item, want 1", noFunc)
			}
			if got := q.QueueBatch(); got != 0 {
				t.Errorf("empty QueueBatch = %d", got)
			}
		})
	}
}

// A destroyed queue refuses a batch: 0 queued, the items stay idle and
// can be queued elsewhere. Catches a batch that leaves items pending.
func TestQueueBatchDestroyed(t *testing.T) {
	captureErrors(t)
	q, err := wq.Alloc("batch-dead", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	q.Destroy()
	var ran atomic.Int32
	w := wq.NewWork(func() { ran.Add(1) })
	if got := q.QueueBatch(w, w); got != 0 {
		t.Fatalf("QueueBatch on a destroyed queue = %d", got)
	}
	q2 := mustAlloc(t, "batch-alive", wq.Unbound, 0)
	if !q2.Queue(w) {
		t.Fatal("an item refused by a destroyed queue's batch stayed pending")
	}
	q2.Flush()
	if ran.Load() != 1 {
		t.Fatal("item did not run")
	}
}

// Each pool is woken after the last insertion of the batch: every wake-up
// stamp of the batch's items is later than every item's queue stamp.
// Catches a batch that wakes at the first insertion, as Queue does (the
// first item's worker is then woken before the later items are queued).
func TestQueueBatchWakesAfterLastInsertion(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags wq.Flags
		opts  []wq.Option
	}{
		{"percpu", wq.PerCPU, nil},
		{"unbound-threads", wq.Unbound, []wq.Option{wq.Threads()}},
		{"unbound", wq.Unbound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := mustAlloc(t, "batch-wake-"+tc.name, tc.flags, 0, tc.opts...)
			w0 := wq.NewWork(func() {})
			q.Queue(w0) // a worker for the pool
			q.Flush()
			var mu sync.Mutex
			var queued, woken []int64
			labsys.SetStageRecorder(func(s *labsys.Stages) {
				if s.Workqueue != q.Name() {
					return
				}
				mu.Lock()
				queued = append(queued, s.QueueNs)
				if s.WakeNs != 0 {
					woken = append(woken, s.WakeNs)
				}
				mu.Unlock()
			})
			defer labsys.SetStageRecorder(nil)
			const n = 32
			items := make([]*wq.Work, n)
			for i := range items {
				items[i] = wq.NewWork(func() {})
			}
			// Several rounds, each from parked workers (an awake worker
			// takes the items with no wake-up, and proves nothing).
			for round := 0; round < 10; round++ {
				waitFor(t, "the pool's workers idle", func() bool { return poolsIdle(q) })
				time.Sleep(2 * time.Millisecond) // from idle to parked
				mu.Lock()
				queued, woken = queued[:0], woken[:0]
				mu.Unlock()
				if got := q.QueueBatch(items...); got != n {
					t.Fatalf("QueueBatch = %d", got)
				}
				q.Flush()
				mu.Lock()
				if len(queued) != n {
					mu.Unlock()
					t.Fatalf("%d items recorded, want %d", len(queued), n)
				}
				last := int64(0)
				for _, qn := range queued {
					last = max(last, qn)
				}
				for _, wn := range woken {
					if wn < last {
						mu.Unlock()
						t.Fatalf("round %d: a worker was woken %d ns before the batch's last item was queued", round, last-wn)
					}
				}
				mu.Unlock()
			}
		})
	}
}

// A Work that appears twice in a batch is queued once, or twice when a
// worker took the first instance before the second was reached (as two
// Queue calls): the count QueueBatch returns is always the number of runs
// it caused. Catches a count that says "queued once" for an item that ran
// twice, or the reverse.
func TestQueueBatchDuplicateCountMatchesRuns(t *testing.T) {
	for _, flags := range []wq.Flags{wq.Unbound, wq.PerCPU} {
		q := mustAlloc(t, "batch-dup", flags, 0)
		var runs atomic.Int64
		a := wq.NewWork(func() { runs.Add(1) })
		others := make([]*wq.Work, 32)
		for i := range others {
			others[i] = wq.NewWork(func() { runs.Add(1) })
		}
		batch := append(append([]*wq.Work{a}, others...), a)
		var counted int64
		for range 2000 {
			counted += int64(q.QueueBatch(batch...))
			q.Flush()
		}
		if got := runs.Load(); got != counted {
			t.Errorf("%v: QueueBatch counted %d queued, %d runs", flags, counted, got)
		}
	}
}

// A QueueBatch whose error handler or tracer ends the caller's goroutine
// with runtime.Goexit part-way through (as t.FailNow or gomock do) still
// wakes the pool of the items it had queued: an accepted item runs and
// Flush returns. Catches a held wake-up lost on an exit path.
func TestQueueBatchGoexitReleasesPlug(t *testing.T) {
	for _, exit := range []string{"error-handler", "tracer"} {
		for _, kind := range []struct {
			name string
			opts []wq.Option
		}{{"goroutines", nil}, {"threads", []wq.Option{wq.Threads()}}} {
			t.Run(exit+"/"+kind.name, func(t *testing.T) {
				name := "batch-goexit-" + exit + "-" + kind.name
				opts := kind.opts
				if exit == "error-handler" {
					opts = append(opts, wq.WithErrorHandler(func(op, fn string, err error) {
						if errors.Is(err, wq.ErrNoFunc) {
							runtime.Goexit()
						}
					}))
				}
				q := mustAlloc(t, name, wq.Unbound, 0, opts...)
				// Let the pool's first worker park: the batch's item then
				// needs the held wake-up.
				q.Queue(wq.NewWork(func() {}))
				q.Flush()
				waitFor(t, "pool idle", func() bool { return poolsIdle(q) })
				time.Sleep(20 * time.Millisecond)
				ran := make(chan struct{})
				a := wq.NewWork(func() { close(ran) })
				second := wq.NewWork(func() {})
				batch := []*wq.Work{a, nil}
				if exit == "tracer" {
					batch = []*wq.Work{a, second}
					var n atomic.Int32
					wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
						if ev.Kind == wqtrace.QueueWork && ev.Workqueue == name && n.Add(1) == 2 {
							runtime.Goexit()
						}
					}))
					t.Cleanup(func() { wq.SetTracer(nil) })
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					q.QueueBatch(batch...)
					t.Error("QueueBatch returned; the Goexit did not happen")
				}()
				waitChan(t, "QueueBatch's goroutine", done)
				wq.SetTracer(nil)
				select {
				case <-ran:
				case <-time.After(testutil.Timeout):
					// Wake the pool with a plain Queue, so that the
					// queue's Destroy does not hang after the failure.
					t.Error("the accepted item did not run: its wake-up was lost")
					q.Queue(wq.NewWork(func() {}))
				}
				mustReturn(t, "Flush", q.Flush)
			})
		}
	}
}
