package driver

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
)

// MaxWQLoad bounds WQLoad's n.
const MaxWQLoad = 1024

// WQLoadItem is how long each item of WQLoad spins.
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

// Spin keeps the calling goroutine's CPU busy for d of wall time.
func Spin(d time.Duration) {
	x := uint64(1)
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 200 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}
