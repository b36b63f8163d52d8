package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
)

// MaxWQLoad bounds WQLoad's n.
const MaxWQLoad = 1024

// WQLoadItem is the CPU time each item of WQLoad spins (Spin).
const WQLoadItem = 2 * time.Millisecond

// WQLoad keeps n CPU-bound items of WQLoadItem in flight on a default
// (goroutine-backed) queue of this process, "wqlab-load", until stop: the
// in-process load made of gowq's own goroutines, beside GoLoad's raw
// goroutines. Each item queues its successor as it ends. n <= 0 starts
// nothing. stop waits for the items in flight and destroys the queue;
// done returns how many items ran so far.
func WQLoad(n int) (stop func(), done func() int64, err error) {
	if n <= 0 {
		return func() {}, func() int64 { return 0 }, nil
	}
	if n > MaxWQLoad {
		return nil, nil, fmt.Errorf("driver: wq-load %d (want 0..%d)", n, MaxWQLoad)
	}
	q, err := wq.Alloc("wqlab-load", wq.Unbound, min(n, 2048))
	if err != nil {
		return nil, nil, err
	}
	var quit atomic.Bool
	var ran atomic.Int64
	var wg sync.WaitGroup
	var item func()
	item = func() {
		Spin(WQLoadItem)
		ran.Add(1)
		if quit.Load() || q.Go(item) != nil {
			wg.Done()
		}
	}
	wg.Add(n)
	for range n {
		if q.Go(item) != nil {
			wg.Done()
		}
	}
	return func() {
		quit.Store(true)
		wg.Wait()
		q.Destroy()
	}, ran.Load, nil
}

// Spin keeps the calling goroutine's CPU busy for about d of CPU time: a
// fixed number of iterations of a small loop, calibrated once against the
// thread CPU clock, and no system call, so that an item that shares its
// CPU with others takes longer in wall time rather than counting time it
// did not run.
func Spin(d time.Duration) {
	n := int64(float64(d.Nanoseconds()) * spinRate())
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink.Add(x)
}

var spinCal struct {
	once sync.Once
	rate float64 // iterations per ns of CPU time
}

// spinRate calibrates Spin once: the best of five runs of 2^20
// iterations, timed by the thread CPU clock.
func spinRate() float64 {
	spinCal.once.Do(func() {
		runtime.LockOSThread() // one thread's clock for every reading
		defer runtime.UnlockOSThread()
		var ts unix.Timespec
		cpu := func() int64 {
			_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
			return ts.Nano()
		}
		const iters = 1 << 20
		best := int64(1 << 62)
		x := uint64(1)
		for range 5 {
			t0 := cpu()
			for range iters {
				x = x*6364136223846793005 + 1442695040888963407
			}
			if dt := cpu() - t0; dt > 0 && dt < best {
				best = dt
			}
		}
		sink.Add(x)
		spinCal.rate = float64(iters) / float64(best)
	})
	return spinCal.rate
}
