package kthread_test

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/kthread"
)

// TestModDelayedRacingExpiryRunsOnceOrTwice: ModDelayedWork with delays of a few us
// races the timer's expiry (the stale-callback count), on Go timers and
// on the RT timer thread; after each round's FlushWork the item ran once
// or twice (twice when the first arming fired and ran before the second
// ModDelayedWork), never zero times (lost) nor three (fired twice).
func TestModDelayedRacingExpiryRunsOnceOrTwice(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []kthread.Option
	}{{"normal", nil}, {"fifo-low", []kthread.Option{kthread.WithFIFOLow()}}} {
		t.Run(c.name, func(t *testing.T) {
			wk, err := kthread.CreateWorker("kt-rev-mod", c.opts...)
			if errors.Is(err, kthread.ErrPermission) {
				t.Skipf("class refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = wk.Destroy() }()
			var runs atomic.Int32
			dw := kthread.NewDelayedWork(func() { runs.Add(1) })
			for i := range 2000 {
				r0 := runs.Load()
				wk.ModDelayedWork(dw, time.Duration(i%7)*time.Microsecond)
				for range i % 3 {
					runtime.Gosched()
				}
				wk.ModDelayedWork(dw, time.Duration(i%5)*3*time.Microsecond)
				wk.FlushWork(&dw.Work)
				if n := runs.Load() - r0; n < 1 || n > 2 {
					t.Fatalf("round %d: the item ran %d times (want 1 or 2)", i, n)
				}
				if i%4 == 0 {
					wk.ModDelayedWork(dw, time.Duration(i%7)*time.Microsecond)
					wk.CancelDelayedWorkSync(dw)
					r1 := runs.Load()
					wk.FlushWork(&dw.Work)
					if runs.Load() != r1 {
						t.Fatalf("round %d: ran after CancelDelayedWorkSync", i)
					}
				}
			}
		})
	}
}
