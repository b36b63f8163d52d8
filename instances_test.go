package wq_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// A Work runs at most once at a time in the whole process: queueing it on
// a second queue while it runs on a first is refused with ErrOtherQueue
// (instances.go, docs/decisions.md).

// runningOn starts fn's instance of w on q and waits until it runs; the
// returned release lets it end.
func runningOn(t *testing.T, q *wq.Workqueue, w *wq.Work, started <-chan struct{}) {
	t.Helper()
	if !q.Queue(w) {
		t.Fatalf("Queue on %s = false", q.Name())
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatalf("the instance on %s did not start", q.Name())
	}
}

// TestSecondQueueRefusedWhileRunning: while a Work runs on unbound queue
// A, every way of queueing it on unbound queue B (Queue, QueueOn,
// QueueKeyed, QueueDelayed now and later, ModDelayed) returns false,
// reports ErrOtherQueue and changes nothing: Busy still says RUNNING,
// CancelSync and DisableSync wait for the instance on A, and once it has
// ended the item can go to B. Catches two concurrent instances of one
// item, which CancelSync returned beside and Busy reported as idle.
func TestSecondQueueRefusedWhileRunning(t *testing.T) {
	errs := captureErrors(t)
	a := mustAlloc(t, "inst-a", wq.Unbound, 0)
	b := mustAlloc(t, "inst-b", wq.Unbound, 0)
	var running, maxRunning atomic.Int32
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	end := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(end) // before the queues' Destroy, which waits for the instances
	fn := func() {
		n := running.Add(1)
		if n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		running.Add(-1)
	}
	dw := wq.NewDelayedWork(fn)
	w := &dw.Work
	runningOn(t, a, w, started)
	cpu := wq.OnlineCPUs()[0]
	for _, c := range []struct {
		name  string
		queue func() bool
	}{
		{"Queue", func() bool { return b.Queue(w) }},
		{"QueueOn", func() bool { return b.QueueOn(cpu, w) }},
		{"QueueKeyed", func() bool { return b.QueueKeyed(7, w) }},
		{"QueueDelayed/0", func() bool { return b.QueueDelayed(dw, 0) }},
		{"QueueDelayed/1h", func() bool { return b.QueueDelayed(dw, time.Hour) }},
		{"ModDelayed", func() bool { return b.ModDelayed(dw, time.Millisecond) }},
	} {
		before := errs.count(wq.ErrOtherQueue)
		if c.queue() {
			t.Errorf("%s on B while the item runs on A = true, want false", c.name)
		}
		if got := errs.count(wq.ErrOtherQueue) - before; got != 1 {
			t.Errorf("%s on B: ErrOtherQueue reported %d times, want 1", c.name, got)
		}
		if w.Pending() {
			t.Fatalf("%s on B left the item pending", c.name)
		}
		if got := w.Busy(); got != wq.BusyRunning {
			t.Errorf("%s on B: Busy = %v while the instance on A runs, want RUNNING only", c.name, got)
		}
	}
	// Requeueing on A itself is still allowed: it runs again after.
	if !a.Queue(w) {
		t.Error("requeue on A while it runs on A = false, want true")
	}
	// CancelSync waits for the instance on A (and cancels the requeue).
	cancelled := make(chan bool, 1)
	go func() { cancelled <- w.CancelSync() }()
	select {
	case <-cancelled:
		t.Fatal("CancelSync returned while the item runs on A")
	case <-time.After(50 * time.Millisecond):
	}
	end()
	select {
	case was := <-cancelled:
		if !was {
			t.Error("CancelSync = false, want true (the requeue on A was pending)")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CancelSync did not return after the instance ended")
	}
	if got := w.Busy(); got != 0 {
		t.Errorf("Busy = %v after CancelSync, want 0", got)
	}
	if running.Load() != 0 {
		t.Errorf("CancelSync returned with %d instances running", running.Load())
	}
	// Idle now: it may go to B.
	if !b.Queue(w) {
		t.Error("Queue on B once idle = false")
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the instance on B did not start")
	}
	mustReturn(t, "Flush", func() { w.Flush() })
	if maxRunning.Load() != 1 {
		t.Errorf("%d instances ran at once, want 1", maxRunning.Load())
	}
}

// TestSecondQueueFromOwnFunction: a work function that queues its own
// item on another queue is refused (it is still running), and one that
// requeues it on its own queue is not. Catches a refusal that misses the
// chained case, and one that refuses the requeue on the same queue.
func TestSecondQueueFromOwnFunction(t *testing.T) {
	errs := captureErrors(t)
	a := mustAlloc(t, "inst-self-a", wq.Unbound, 0)
	b := mustAlloc(t, "inst-self-b", wq.PerCPU, 0)
	var runs atomic.Int32
	var other, same atomic.Bool
	var w *wq.Work
	w = wq.NewWork(func() {
		if runs.Add(1) == 1 {
			other.Store(b.Queue(w))
			same.Store(a.Queue(w))
		}
	})
	a.Queue(w)
	waitFor(t, "two runs", func() bool { return runs.Load() == 2 })
	mustReturn(t, "Flush", func() { w.Flush() })
	if other.Load() {
		t.Error("Queue on another queue from the item's own function = true, want false")
	}
	if !same.Load() {
		t.Error("Queue on its own queue from its own function = false, want true")
	}
	if n := errs.count(wq.ErrOtherQueue); n != 1 {
		t.Errorf("ErrOtherQueue reported %d times, want 1", n)
	}
}

// TestCancelSyncNeverBesideAnInstance: rounds of the example: an
// item runs on queue A, is queued on queue B meanwhile, and CancelSync or
// DisableSync is called. None may return while an instance runs, Busy
// may never read 0 while one runs, and at most one instance may run at a
// time. Catches a CancelSync that returned as soon as either of two
// instances ended, and Busy following a single runner pointer.
func TestCancelSyncNeverBesideAnInstance(t *testing.T) {
	captureErrors(t)
	a := mustAlloc(t, "inst-st-a", wq.Unbound, 0)
	b := mustAlloc(t, "inst-st-b", wq.PerCPU, 0) // another pool: the instances can run at once
	var running, maxRunning, idleWhileRunning atomic.Int32
	started := make(chan struct{}, 2)
	w := wq.NewWork(func() {
		n := running.Add(1)
		if n > maxRunning.Load() {
			maxRunning.Store(n)
		}
		started <- struct{}{}
		time.Sleep(time.Millisecond)
		running.Add(-1)
	})
	for round := 0; round < 50; round++ {
		a.Queue(w)
		<-started
		time.Sleep(100 * time.Microsecond)
		b.Queue(w)
		time.Sleep(300 * time.Microsecond)
		if running.Load() > 0 && w.Busy()&wq.BusyRunning == 0 && running.Load() > 0 {
			idleWhileRunning.Add(1)
		}
		if round%2 == 0 {
			w.CancelSync()
		} else {
			w.DisableSync()
			w.Enable()
		}
		if n := running.Load(); n != 0 {
			t.Fatalf("round %d: CancelSync/DisableSync returned with %d instances running", round, n)
		}
		for len(started) > 0 {
			<-started
		}
	}
	if n := maxRunning.Load(); n > 1 {
		t.Errorf("%d instances ran at once, want at most 1", n)
	}
	if n := idleWhileRunning.Load(); n > 0 {
		t.Errorf("Busy read 0 while an instance ran, %d times", n)
	}
}

// TestSelfRequeueKeptWhileRefusedElsewhere: an item on queue A requeues
// itself from its own function, a bounded number of times, while another
// goroutine keeps queueing it on queue B (Queue, QueueErr, QueueKeyed,
// QueueDelayed now and later), each refused with ErrOtherQueue. A
// self-requeue that returns true, or false without an error (already
// pending), promises one more run after it: the item must run exactly
// as many times as its requeues promise, and B must never find it idle
// (it is pending or running on A from the first Queue to the end of the
// last run). Catches a refusal made after the entry had taken the
// item's PENDING: a self-requeue in that window found the item pending
// and returned false, and the refusal then released the item, so the
// promised run was lost.
func TestSelfRequeueKeptWhileRefusedElsewhere(t *testing.T) {
	const runsWanted = 20000
	a := mustAlloc(t, "inst-req-a", wq.Unbound, 0)
	var reports, otherReports atomic.Int64
	b := mustAlloc(t, "inst-req-b", wq.Unbound, 0, wq.WithErrorHandler(func(op, fn string, err error) {
		if !errors.Is(err, wq.ErrOtherQueue) {
			otherReports.Add(1)
			return
		}
		reports.Add(1)
	}))
	var (
		runs      atomic.Int32
		requeueMu sync.Mutex
		requeueEr error // the first self-requeue that failed
		lost      atomic.Bool
		refusals  atomic.Int64
	)
	last := make(chan struct{})
	hammerDone := make(chan struct{})
	var dw *wq.DelayedWork
	var w *wq.Work
	dw = wq.NewDelayedWork(func() {
		k := runs.Add(1)
		if k == runsWanted {
			close(last)
			// The last run ends only once B stopped: until then the item
			// is never idle, and B must never queue it.
			select {
			case <-hammerDone:
			case <-time.After(60 * time.Second):
			}
			return
		}
		if k > runsWanted {
			return
		}
		if _, err := a.QueueErr(w); err != nil {
			requeueMu.Lock()
			if requeueEr == nil {
				requeueEr = fmt.Errorf("run %d: self-requeue on A: %w", k, err)
			}
			requeueMu.Unlock()
		}
	})
	w = &dw.Work
	if !a.Queue(w) {
		t.Fatal("first Queue on A = false")
	}
	go func() {
		defer close(hammerDone)
		for i := 0; ; i++ {
			stop := false
			select {
			case <-last:
				stop = true // one more call, refused: the last run is on A
			default:
			}
			var queued bool
			var err error
			switch i % 5 {
			case 0:
				queued = b.Queue(w)
			case 1:
				queued, err = b.QueueErr(w)
			case 2:
				queued = b.QueueKeyed(uint64(i), w)
			case 3:
				queued = b.QueueDelayed(dw, 0)
			case 4:
				queued = b.QueueDelayed(dw, time.Hour)
			}
			switch {
			case queued:
				lost.Store(true)
				t.Errorf("call %d on B queued the item after run %d of %d: it was idle, so a run its self-requeue promised was lost", i, runs.Load(), runsWanted)
				return
			case errors.Is(err, wq.ErrOtherQueue):
				refusals.Add(1)
			case err != nil:
				t.Errorf("QueueErr on B: %v, want ErrOtherQueue or (false, nil)", err)
			}
			if stop {
				return
			}
		}
	}()
	waitFor(t, "the promised runs", func() bool {
		if lost.Load() {
			return true
		}
		requeueMu.Lock()
		defer requeueMu.Unlock()
		return requeueEr != nil || runs.Load() >= runsWanted
	})
	waitChan(t, "B's goroutine", hammerDone)
	if lost.Load() {
		dw.CancelSync() // B may have armed it for an hour
	}
	mustReturn(t, "Flush", func() { w.Flush() })
	requeueMu.Lock()
	if requeueEr != nil {
		t.Error(requeueEr)
	}
	requeueMu.Unlock()
	if got := runs.Load(); got != runsWanted {
		t.Errorf("the item ran %d times, want %d (each self-requeue promised one run)", got, runsWanted)
	}
	if n := otherReports.Load(); n != 0 {
		t.Errorf("B reported %d errors other than ErrOtherQueue", n)
	}
	if refusals.Load()+reports.Load() == 0 {
		t.Error("B refused nothing: the test did not race")
	}
	t.Logf("B refused %d calls (QueueErr) and reported %d", refusals.Load(), reports.Load())
}

// TestQueueNeverRefusedForItsOwnQueue: items queued only on queue A,
// again and again, while queue B's items keep the shared unbound pool's
// workers busy, are never refused with ErrOtherQueue. Catches a check of
// the other queue that read the item's runner, then the runner's pwq,
// while the worker ended the item and took one of B's between the two
// loads. The window is a few instructions: without -race this failed 4
// runs in 6 on the unfixed check (1 to 4 refusals in 13M-26M calls);
// under -race it was not seen to fail.
func TestQueueNeverRefusedForItsOwnQueue(t *testing.T) {
	a := mustAlloc(t, "inst-own-a", wq.Unbound, 0)
	b := mustAlloc(t, "inst-own-b", wq.Unbound, 0)
	var stop atomic.Bool
	var bws []*wq.Work
	for range 8 {
		var bw *wq.Work
		bw = wq.NewWork(func() {
			if !stop.Load() {
				b.Queue(bw)
			}
		})
		bws = append(bws, bw)
		b.Queue(bw)
	}
	var (
		bad, calls atomic.Int64
		first      atomic.Value
		wg         sync.WaitGroup
	)
	deadline := time.Now().Add(2 * time.Second)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := wq.NewWork(func() {})
			for time.Now().Before(deadline) {
				_, err := a.QueueErr(w)
				calls.Add(1)
				if errors.Is(err, wq.ErrOtherQueue) {
					bad.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
			w.Flush()
		}()
	}
	mustReturn(t, "the queuers and the Flush of their items", wg.Wait)
	stop.Store(true)
	for _, bw := range bws {
		mustReturn(t, "CancelSync of B's item", func() { bw.CancelSync() })
	}
	if n := bad.Load(); n != 0 {
		t.Errorf("%d of %d QueueErr calls on A refused with ErrOtherQueue (first: %v); the items were only ever queued on A", n, calls.Load(), first.Load())
	}
}
