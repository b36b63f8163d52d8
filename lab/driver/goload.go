package driver

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// GoLoad starts n goroutines of this process that spin until stop is
// called, so that every P is busy (in-process load, issue 14: an RT
// worker back from futex_wait must still find a P). The spin loop makes
// no call the scheduler could preempt at cooperatively; the Go runtime
// preempts it asynchronously (sysmon, every 10-20 ms), as it would a
// busy goroutine of a real program. stop blocks until every goroutine
// has returned. n <= 0 starts nothing.
func GoLoad(n int) (stop func()) {
	if n <= 0 {
		return func() {}
	}
	var quit atomic.Bool
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			x := uint64(1)
			for !quit.Load() {
				for range 1000 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
			sink.Add(x)
		})
	}
	runtime.Gosched()
	return func() {
		quit.Store(true)
		wg.Wait()
	}
}

var sink atomic.Uint64
