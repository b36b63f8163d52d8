package wq_test

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestReview4PanicHandlerMayWaitForItem: a panic handler runs on the
// worker after the work function, as part of the item. One that queues
// another item on the same per-CPU pool and waits for it must see it run:
// its worker sleeps in the handler, which the CM monitor must count as a
// blocked item (wake another worker), and the worker must not be a
// scanner there (incoming.go), or the item is pushed for a worker that is
// not coming. It failed when the handler ran with worker.inFn false and
// the worker counted in pool.scanners: the item was drained by the CM
// monitor onto the worklist behind the worker, counted as running, and
// nobody ran it until the handler gave up.
func TestReview4PanicHandlerMayWaitForItem(t *testing.T) {
	ran := make(chan struct{})
	second := wq.NewWork(func() { close(ran) })
	waited := make(chan bool, 1)
	var q *wq.Workqueue
	q, err := wq.Alloc("review4-panic", wq.PerCPU, 0, wq.WithPanicHandler(func(wq.PanicInfo) {
		q.QueueOn(0, second)
		select {
		case <-ran:
			waited <- true
		case <-time.After(10 * time.Second):
			waited <- false
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	q.QueueOn(0, wq.NewWork(func() { panic("review4") }))
	if !<-waited {
		t.Fatal("an item queued by a waiting panic handler on its own per-CPU pool never ran (10 s)")
	}
}

// TestReview4RecorderGoexitKeepsItem: a stage recorder that calls
// runtime.Goexit ends its worker (which is replaced), as a tracer's would;
// the item it was called for must still run, as after a Goexit in the
// tracer's execute_start. It failed when the recorder ran after startRun
// (PENDING cleared, stageRunning): the exit path counted the item as
// completed and released its flush waiters, and its function never ran.
func TestReview4RecorderGoexitKeepsItem(t *testing.T) {
	captureErrors(t) // the worker exit is reported
	var calls atomic.Int32
	wq.SetStageRecorder(func(*wq.Stages) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
	})
	defer wq.SetStageRecorder(nil)
	q := mustAlloc(t, "review4-recgoexit", wq.Unbound, 0)
	ran := make(chan struct{}, 1)
	w := wq.NewWork(func() { ran <- struct{}{} })
	if !q.Queue(w) {
		t.Fatal("Queue refused a new item")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatalf("the item whose stage recorder called runtime.Goexit never ran (recorder calls %d, pending %v)", calls.Load(), w.Pending())
	}
}
