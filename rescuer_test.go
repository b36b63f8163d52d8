package wq_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// The rescuer runs items when no worker can be created.
func TestRescuerPaths(t *testing.T) {
	fail := atomic.Bool{}
	wq.SetCreateWorkerHook(func() error {
		if fail.Load() {
			return errors.New("injected: no threads")
		}
		return nil
	})
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })
	captureErrors(t)

	t.Run("requeue while rescued", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-a", wq.Unbound|wq.MemReclaim, 0)
		var runs atomic.Int32
		var w *wq.Work
		w = wq.NewWork(func() {
			if runs.Add(1) < 5 {
				q.Queue(w) // queued again while the rescuer runs it
			}
		})
		q.Queue(w)
		waitFor(t, "five rescued runs", func() bool { return runs.Load() == 5 })
		waitFor(t, "item idle", func() bool { return w.Busy() == 0 })
		if s := q.Stats(); s.Rescued < 5 || s.CreateErrors == 0 || s.CreateError == "" {
			t.Errorf("stats %+v", s)
		}
	})
	t.Run("mayday after an empty fire", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-b", wq.Unbound|wq.MemReclaim, 0)
		for round := 0; round < 3; round++ {
			var ran atomic.Bool
			q.Queue(wq.NewWork(func() { ran.Store(true) }))
			waitFor(t, "rescued item", ran.Load)
			// Let the mayday timer fire with an empty worklist.
			time.Sleep(150 * time.Millisecond)
		}
	})
	t.Run("Goexit in a rescued item", func(t *testing.T) {
		fail.Store(true)
		defer fail.Store(false)
		q := mustAlloc(t, "resq-c", wq.PerCPU|wq.MemReclaim, 0)
		for i := 0; i < 3; i++ {
			w := wq.NewWork(func() { runtime.Goexit() })
			q.Queue(w)
			mustReturn(t, "Flush of a Goexit item", func() { w.Flush() })
		}
		var ran atomic.Bool
		q.Queue(wq.NewWork(func() { ran.Store(true) }))
		waitFor(t, "rescuer restarted", ran.Load)
	})
	t.Run("no rescue while a worker runs", func(t *testing.T) {
		q := mustAlloc(t, "resq-d", wq.PerCPU|wq.MemReclaim, 0)
		// One worker busy spinning (counted as running), creation failing.
		spin := make(chan struct{})
		var spinning atomic.Bool
		q.QueueOn(0, wq.NewWork(func() {
			spinning.Store(true)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				select {
				case <-spin:
					return
				default:
				}
			}
		}))
		waitFor(t, "spinner", spinning.Load)
		fail.Store(true)
		var ran atomic.Bool
		q.QueueOn(0, wq.NewWork(func() { ran.Store(true) }))
		time.Sleep(50 * time.Millisecond)
		rescuedWhileRunning := q.Stats().Rescued
		close(spin)
		fail.Store(false)
		waitFor(t, "second item", ran.Load)
		// The spinner might have been marked CPU-intensive (it is not
		// counted then, so rescuing is allowed); only complain when it
		// was not.
		if rescuedWhileRunning > 0 && q.Stats().CPUItsv == 0 {
			t.Errorf("rescuer ran %d items while a concurrency-managed worker was running", rescuedWhileRunning)
		}
	})
}

func TestRescuer(t *testing.T) {
	q := mustAlloc(t, "reclaim", wq.PerCPU|wq.MemReclaim, 0)
	// Start the pool's workers, then forbid new ones.
	q.QueueOn(0, wq.NewWork(func() {}))
	q.Flush()
	wq.SetCreateWorkerHook(func() error { return errors.New("injected: no memory") })
	defer wq.SetCreateWorkerHook(nil)
	// Occupy every existing worker with a blocking item.
	all, _ := q.NumWorkers(0)
	release := make(chan struct{})
	for i := 0; i < all; i++ {
		q.QueueOn(0, wq.NewWork(func() { <-release }))
	}
	var rescued atomic.Bool
	w := wq.NewWork(func() { rescued.Store(true) })
	q.QueueOn(0, w)
	waitFor(t, "rescuer to run the stuck item", rescued.Load)
	if q.Stat("mayday") < 1 || q.Stat("rescued") < 1 {
		t.Errorf("mayday %d rescued %d, want >= 1", q.Stat("mayday"), q.Stat("rescued"))
	}
	close(release)
	wq.SetCreateWorkerHook(nil)
	q.Flush()
}
