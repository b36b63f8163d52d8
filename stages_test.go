package wq_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/internal/sched"
)

// stageLog collects the recorded stages of the items it watches.
type stageLog struct {
	mu    sync.Mutex
	watch map[*wq.Work]bool
	got   map[*wq.Work][]labsys.Stages
}

func newStageLog(t *testing.T, ws ...*wq.Work) *stageLog {
	l := &stageLog{watch: map[*wq.Work]bool{}, got: map[*wq.Work][]labsys.Stages{}}
	for _, w := range ws {
		l.watch[w] = true
	}
	labsys.SetStageRecorder(l.record)
	t.Cleanup(func() { labsys.SetStageRecorder(nil) })
	return l
}

func (l *stageLog) record(s *labsys.Stages) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, _ := s.Work.(*wq.Work); l.watch[w] {
		l.got[w] = append(l.got[w], *s)
	}
}

func (l *stageLog) take(w *wq.Work) []labsys.Stages {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.got[w]
	delete(l.got, w)
	return s
}

// ordered reports whether the non-zero stages of s are non-decreasing in
// path order.
func ordered(s labsys.Stages) bool {
	var last int64
	for _, v := range []int64{s.QueueNs, s.LockedNs, s.WakeNs, s.WokenNs, s.HavePNs, s.StartNs} {
		if v == 0 {
			continue
		}
		if v < last {
			return false
		}
		last = v
	}
	return true
}

func allSix(s labsys.Stages) bool {
	return s.QueueNs != 0 && s.LockedNs != 0 && s.WakeNs != 0 && s.WokenNs != 0 && s.HavePNs != 0 && s.StartNs != 0
}

// testIdleWakeStages queues an item on q's pool for cpu after the pool
// went quiet, until one finds its worker asleep in futex_wait (a queue
// right after the previous item may find the worker not yet parked: no
// wake-up then). That item must report all six stages, in path order;
// every recorded item must be in path order and name q.
func testIdleWakeStages(t *testing.T, q *wq.Workqueue, name string, cpu int) {
	w := wq.NewWork(func() {})
	l := newStageLog(t, w)
	for try := 0; try < 200; try++ {
		time.Sleep(2 * time.Millisecond) // the worker parks meanwhile
		if !q.QueueOn(cpu, w) {
			t.Fatal("QueueOn of an idle item returned false")
		}
		w.Flush()
		recs := l.take(w)
		if len(recs) != 1 {
			t.Fatalf("try %d: %d records for one item, want 1", try, len(recs))
		}
		s := recs[0]
		if s.Workqueue != name || !ordered(s) || s.QueueNs == 0 || s.LockedNs == 0 || s.StartNs == 0 {
			t.Fatalf("try %d: stages %+v: want queue %q, queue, locked and start stamped, in path order", try, s, name)
		}
		if allSix(s) {
			return
		}
	}
	t.Fatalf("200 items queued 2 ms apart to an idle pool, none recorded a futex wake-up (all six stages)")
}

// TestStagesIdleWorkerNormal: an item queued to an idle normal per-CPU
// pool records all six stages of the wake path, in order.
func TestStagesIdleWorkerNormal(t *testing.T) {
	q := mustAlloc(t, "stages-normal", wq.PerCPU, 0)
	testIdleWakeStages(t, q, "stages-normal", wq.OnlineCPUs()[0])
}

// TestStagesIdleWorkerRT: the same for an RT per-CPU pool, where the
// process may use SCHED_FIFO.
func TestStagesIdleWorkerRT(t *testing.T) {
	if err := sched.CheckRT(wq.RTPriority()); err != nil {
		t.Skipf("SCHED_FIFO not permitted here: %v", err)
	}
	q, err := wq.Alloc("stages-rt", wq.PerCPU|wq.RT, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skipf("RT pool refused: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	testIdleWakeStages(t, q, "stages-rt", wq.OnlineCPUs()[0])
}

// TestStagesOff: with no recorder, nothing is recorded, and a recorder
// set later does not report stamps from before it.
func TestStagesOff(t *testing.T) {
	q := mustAlloc(t, "stages-off", wq.PerCPU, 0)
	w := wq.NewWork(func() {})
	l := newStageLog(t, w)
	labsys.SetStageRecorder(nil)
	for i := 0; i < 20; i++ {
		q.QueueOn(wq.OnlineCPUs()[0], w)
		w.Flush()
	}
	if n := len(l.take(w)); n != 0 {
		t.Fatalf("%d records with the recorder off", n)
	}
	if a, b := w.StageStamps(); a != 0 || b != 0 {
		t.Fatalf("queue path stamped the item with the recorder off: %d %d", a, b)
	}
	// On again: recorded again.
	labsys.SetStageRecorder(l.record)
	q.QueueOn(wq.OnlineCPUs()[0], w)
	w.Flush()
	if recs := l.take(w); len(recs) != 1 || recs[0].QueueNs == 0 || recs[0].StartNs == 0 {
		t.Fatalf("recorder on again: %+v, want one record with queue and start stamps", recs)
	}
}

// TestStagesAwakeWorker: an item queued by a running item on the same
// per-CPU pool is taken by that worker after it, awake: no wake-up
// stages. The first item, queued to the idle pool, is the control.
func TestStagesAwakeWorker(t *testing.T) {
	q := mustAlloc(t, "stages-awake", wq.PerCPU, 0)
	cpu := wq.OnlineCPUs()[0]
	second := wq.NewWork(func() {})
	first := wq.NewWork(func() { q.QueueOn(cpu, second) })
	l := newStageLog(t, first, second)
	for i := 0; i < 10; i++ {
		q.QueueOn(cpu, first)
		first.Flush()
		second.Flush()
		a, b := l.take(first), l.take(second)
		if len(a) != 1 || len(b) != 1 {
			t.Fatalf("records: first %d, second %d; want 1 each", len(a), len(b))
		}
		s := b[0]
		if s.WakeNs != 0 || s.WokenNs != 0 || s.HavePNs != 0 {
			t.Fatalf("item taken by the awake worker reports a wake-up: %+v", s)
		}
		if s.QueueNs == 0 || s.LockedNs == 0 || s.StartNs == 0 || !ordered(s) {
			t.Fatalf("second item's stages %+v: want queue, locked and start, in order", s)
		}
		if s.QueueNs < a[0].StartNs {
			t.Fatalf("second item queued (%d) before the first started (%d)", s.QueueNs, a[0].StartNs)
		}
	}
}

// TestStagesRecorderPanic: a recorder that panics is recovered; the item
// runs and the worker keeps serving.
func TestStagesRecorderPanic(t *testing.T) {
	q := mustAlloc(t, "stages-panic", wq.PerCPU, 0)
	ran := make(chan struct{}, 2)
	w := wq.NewWork(func() { ran <- struct{}{} })
	newStageLog(t)
	labsys.SetStageRecorder(func(s *labsys.Stages) {
		if s.Work == w {
			panic("recorder")
		}
	})
	for i := 0; i < 2; i++ {
		q.QueueOn(wq.OnlineCPUs()[0], w)
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("item did not run after its recorder panicked")
		}
	}
}

// BenchmarkQueueStages is BenchmarkQueueNoTracer with a stage recorder
// set (it copies nothing): the stamps, the wake-up's clock_gettime and
// the recorder call. Compare with BenchmarkQueueNoTracer for the cost of
// the recorder, and BenchmarkQueueNoTracer with an older build for the
// cost of the stage points with no recorder (one atomic load each).
func BenchmarkQueueStages(b *testing.B) {
	labsys.SetStageRecorder(func(*labsys.Stages) {})
	defer labsys.SetStageRecorder(nil)
	b.Run("queue", func(b *testing.B) { benchQueueOnly(b) })
	b.Run("roundtrip", benchQueueRoundTrip)
}

// TestStagesNonDecreasing: under three producers queueing back to back on
// a per-CPU queue (workers woken, awake, spinning, taking pushed items),
// every recorded item's non-zero stages are in order. A wake-up that
// happened between the item's queue entry and its insertion (the worker
// woke for something else) was once reported as this item's, before its
// LockedNs (found by a stranger's run, 1 run in 2-4).
func TestStagesNonDecreasing(t *testing.T) {
	var bad, calls atomic.Int64
	var mu sync.Mutex
	var ex []string
	labsys.SetStageRecorder(func(s *labsys.Stages) {
		calls.Add(1)
		prev := int64(0)
		for _, v := range []int64{s.QueueNs, s.LockedNs, s.WakeNs, s.WokenNs, s.HavePNs, s.StartNs} {
			if v == 0 {
				continue
			}
			if v < prev {
				bad.Add(1)
				mu.Lock()
				if len(ex) < 3 {
					ex = append(ex, fmt.Sprintf("%+v", *s))
				}
				mu.Unlock()
				return
			}
			prev = v
		}
	})
	defer labsys.SetStageRecorder(nil)
	q := mustAlloc(t, "stages-order", wq.PerCPU, 0)
	ws := make([]*wq.Work, 32)
	for i := range ws {
		ws[i] = wq.NewWork(func() {
			if i%8 == 0 {
				time.Sleep(20 * time.Microsecond)
			}
		})
	}
	var wg sync.WaitGroup
	end := time.Now().Add(2 * time.Second)
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; time.Now().Before(end); i++ {
				q.Queue(ws[i%len(ws)])
				if i%64 == 0 {
					time.Sleep(50 * time.Microsecond)
				}
			}
		}()
	}
	wg.Wait()
	q.Flush()
	if calls.Load() == 0 {
		t.Fatal("the recorder was never called")
	}
	if n := bad.Load(); n > 0 {
		t.Errorf("%d of %d items had stages out of order, e.g. %v", n, calls.Load(), ex)
	}
}

// TestRecorderGoexitKeepsItem: a stage recorder that calls
// runtime.Goexit ends its worker (which is replaced), as a tracer's would;
// the item it was called for must still run, as after a Goexit in the
// tracer's execute_start. It failed when the recorder ran after startRun
// (PENDING cleared, stageRunning): the exit path counted the item as
// completed and released its flush waiters, and its function never ran.
func TestRecorderGoexitKeepsItem(t *testing.T) {
	captureErrors(t) // the worker exit is reported
	var calls atomic.Int32
	labsys.SetStageRecorder(func(*labsys.Stages) {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
	})
	defer labsys.SetStageRecorder(nil)
	q := mustAlloc(t, "recgoexit", wq.Unbound, 0)
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
