package driver

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// GoLoad starts n goroutines of this process that spin until stop is
// called, so that every P is busy (in-process load: an RT worker back
// from futex_wait must still find a P). The spin loop makes
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

// GCLoad starts one goroutine of this process that allocates about
// mibPerSec MiB/s of garbage, so that GC cycles (and their
// stop-the-world pauses) happen during a measurement (to see how
// often an STW lands in an RT wake-up, and what GOGC, GOMEMLIMIT and
// mlockall change). It allocates in 1 ms steps: small pointer-holding
// objects (so that marking has work to do), about 4 MiB of which stay
// live in a ring, the rest becoming garbage at once; between steps it
// sleeps, so it keeps a P busy only for the allocation itself (a few
// percent of one CPU at 64 MiB/s). stop blocks until the goroutine has
// returned. mibPerSec <= 0 starts nothing.
func GCLoad(mibPerSec int) (stop func()) {
	if mibPerSec <= 0 {
		return func() {}
	}
	type node struct {
		next *node
		pad  [48]byte
	}
	const nodeSize = 64
	const ringLen = 4 << 20 / (nodeSize * 64)    // chains of 64 nodes, ~4 MiB live
	perStep := mibPerSec << 20 / 1000 / nodeSize // nodes per ms
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		ring := make([]*node, ringLen)
		slot := 0
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			var head *node
			for i := range perStep {
				head = &node{next: head}
				if i%64 == 63 {
					ring[slot] = head // keeps this chain live, frees the one it replaces
					slot = (slot + 1) % len(ring)
					head = nil
				}
			}
			gcSink.Store(head)
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

var gcSink atomic.Value
