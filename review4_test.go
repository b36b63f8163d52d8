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

// TestReview4EscapeSeesPushedItems: a per-CPU queue with escape_after
// whose CPU's worker was woken and cannot run (held by the test hook, as
// one starved by a CPU hog after its futex wake-up) escapes every item
// queued meanwhile, not only the one the worker was woken for. The held
// worker is a scanner (incoming.go): later items are pushed for it, and
// are invisible to the escaper (which scans the worklist of pools marked
// by an activation) until some lock holder drains them. It failed while
// nothing drained the pool: the pool is not busy (no CM sample) and the
// escaper, having escaped the first item, cleared its mark.
func TestReview4EscapeSeesPushedItems(t *testing.T) {
	cpu := escapeCPU(t)
	// The watchdog takes every pool's lock once a second, which drains
	// the pushed items and bounds the delay to a second: turn it off.
	th := wq.WatchdogThresh()
	if err := wq.SetWatchdogThresh(0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wq.SetWatchdogThresh(th) }()
	q := allocEscape(t, "review4-esc", wq.PerCPU, 0, time.Millisecond)
	holdPool(t, q, cpu)
	ran := make(chan int, 2)
	first := wq.NewWork(func() { ran <- wq.GetCPU() })
	if !q.QueueOn(cpu, first) {
		t.Fatal("QueueOn returned false")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the first item did not escape its held CPU")
	}
	// Let the CM monitor find the pool's worklist empty and clear its
	// mark (the failure needs that; the fixed code passes either way).
	time.Sleep(100 * time.Millisecond)
	second := wq.NewWork(func() { ran <- wq.GetCPU() })
	if !q.QueueOn(cpu, second) {
		t.Fatal("QueueOn returned false")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		st := q.Stats()
		t.Fatalf("an item queued while the CPU's woken worker is held never escaped (10 s; ESC %d, pushed %d)", st.ESC, st.Pushed)
	}
	st := q.Stats()
	t.Logf("ESC %d pushed %d", st.ESC, st.Pushed)
}
