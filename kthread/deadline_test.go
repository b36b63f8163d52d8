package kthread_test

import (
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/kthread"
)

// TestHugeDelayDoesNotFireAtOnce catches a delayed item of a worker with
// an RT timer (WithFIFOLow, WithFIFO) running at once when armed with a
// delay near the int64 limit: now plus the delay wrapped into the past.
// The normal worker (Go timers) is checked too. RT variants skip where
// SCHED_FIFO is refused.
func TestHugeDelayDoesNotFireAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
	}{
		{"normal", nil},
		{"fifo-low", []kthread.Option{kthread.WithFIFOLow()}},
		{"fifo", []kthread.Option{kthread.WithFIFO()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-huge-delay", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer wk.Destroy()
			for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1<<63 - 1<<40} {
				var runs atomic.Int32
				dw := kthread.NewDelayedWork(func() { runs.Add(1) })
				if !wk.QueueDelayedWork(dw, d) {
					t.Fatalf("QueueDelayedWork(%d) = false", int64(d))
				}
				time.Sleep(20 * time.Millisecond)
				wk.FlushWorker()
				if n := runs.Load(); n != 0 {
					t.Errorf("delay %d: ran %d times at once", int64(d), n)
				}
				if !wk.ModDelayedWork(dw, d) {
					t.Errorf("delay %d: ModDelayedWork = false: the item was no longer pending", int64(d))
				}
				time.Sleep(5 * time.Millisecond)
				wk.FlushWorker()
				if n := runs.Load(); n != 0 {
					t.Errorf("ModDelayedWork %d: ran %d times at once", int64(d), n)
				}
				if !wk.CancelDelayedWorkSync(dw) {
					t.Errorf("delay %d: CancelDelayedWorkSync = false", int64(d))
				}
			}
		})
	}
}
