package kthread_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/kthread"
)

// TestDelayedRTTimer: a worker created with an RT class (WithFIFOLow,
// WithFIFO) times its delayed items on the RT timer thread, a normal
// worker on Go timers; either way an item runs once per arming, Mod and
// Cancel keep their return values, and Destroy cancels an armed item.
// The RT variants skip where SCHED_FIFO is refused (as nobody).
func TestDelayedRTTimer(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
		rt   bool
	}{
		{"normal", nil, false},
		{"fifo-low", []kthread.Option{kthread.WithFIFOLow()}, true},
		{"fifo", []kthread.Option{kthread.WithFIFO()}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-rttimer", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			dw := kthread.NewDelayedWork(func() { runs.Add(1) })
			if !wk.QueueDelayedWork(dw, time.Hour) {
				t.Fatal("QueueDelayedWork of an idle item = false")
			}
			if got := kthread.ArmedOnRT(dw); got != c.rt {
				t.Fatalf("armed on the RT timer thread = %v, want %v", got, c.rt)
			}
			if wk.QueueDelayedWork(dw, time.Millisecond) {
				t.Fatal("QueueDelayedWork of an armed item = true")
			}
			if !wk.ModDelayedWork(dw, time.Millisecond) {
				t.Fatal("ModDelayedWork of an armed item = false")
			}
			for end := time.Now().Add(10 * time.Second); runs.Load() == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("the 1 ms item never ran")
				}
			}
			wk.FlushWorker()
			if !wk.QueueDelayedWork(dw, time.Hour) {
				t.Fatal("QueueDelayedWork after the run = false")
			}
			if !wk.CancelDelayedWorkSync(dw) {
				t.Fatal("CancelDelayedWorkSync of an armed item = false")
			}
			if wk.CancelDelayedWorkSync(dw) {
				t.Fatal("second CancelDelayedWorkSync = true")
			}
			wk.QueueDelayedWork(dw, time.Hour)
			if err := wk.Destroy(); !errors.Is(err, kthread.ErrDelayedPending) {
				t.Fatalf("Destroy with an armed item: %v, want ErrDelayedPending", err)
			}
			if dw.Pending() {
				t.Fatal("item pending after Destroy")
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("%d runs, want 1", n)
			}
		})
	}
}
