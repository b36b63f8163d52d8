package bench_test

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// Per-key ordering: QueueKeyed against what users do today, in one run.
//
//	go test -run '^$' -bench Keyed -benchtime 5000x -count 3 ./lab/bench
//
// Schemes (each runs the items of a key one at a time, in order):
//   - keyed: one unbound queue, QueueKeyed (gowq extension);
//   - ordered-per-key: one AllocOrdered queue per key;
//   - hashed-ordered-N: N AllocOrdered queues, the key hashed onto one.
//
// BenchmarkKeyedThroughput queues b.N items over 64 keys from one
// goroutine, each item spinning about 1 us, and reports items/s.
// BenchmarkKeyedColdBehindHot keeps a hot key's backlog at 1000 items of
// about 10 us each (a completed hot item queues its successor) and queues
// b.N cold items, one at a time, on 63 other keys; it reports p50/p99 of
// their queue-to-start in ns. A cold key hashed onto the hot key's ordered
// queue waits for the whole backlog.

const benchKeys = 64

type keyedScheme struct {
	name string
	mk   func(b *testing.B) (submit func(key uint64, w *wq.Work) bool, close func())
}

func keyedSchemes() []keyedScheme {
	ordered := func(b *testing.B, n int) ([]*wq.Workqueue, func()) {
		qs := make([]*wq.Workqueue, n)
		for i := range qs {
			q, err := wq.AllocOrdered(fmt.Sprintf("bench-ord-%d", i), 0)
			if err != nil {
				b.Fatal(err)
			}
			qs[i] = q
		}
		return qs, func() {
			for _, q := range qs {
				q.Destroy()
			}
		}
	}
	hashed := func(n int) keyedScheme {
		return keyedScheme{name: fmt.Sprintf("hashed-ordered-%d", n), mk: func(b *testing.B) (func(uint64, *wq.Work) bool, func()) {
			qs, cl := ordered(b, n)
			return func(key uint64, w *wq.Work) bool {
				return qs[(key*0x9e3779b97f4a7c15)%uint64(n)].Queue(w)
			}, cl
		}}
	}
	return []keyedScheme{
		{name: "keyed", mk: func(b *testing.B) (func(uint64, *wq.Work) bool, func()) {
			q, err := wq.Alloc("bench-keyed", wq.Unbound, 0)
			if err != nil {
				b.Fatal(err)
			}
			return q.QueueKeyed, q.Destroy
		}},
		{name: "ordered-per-key", mk: func(b *testing.B) (func(uint64, *wq.Work) bool, func()) {
			qs, cl := ordered(b, benchKeys)
			return func(key uint64, w *wq.Work) bool { return qs[key%benchKeys].Queue(w) }, cl
		}},
		hashed(4),
		hashed(16),
	}
}

func spin(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// warm runs 4096 items over the keys and waits for them, so that every
// scheme starts with the (shared) unbound pool's workers already created.
func warm(submit func(uint64, *wq.Work) bool) {
	var wg sync.WaitGroup
	for i := range 4096 {
		wg.Add(1)
		w := wq.NewWork(wg.Done)
		for !submit(uint64(i%benchKeys), w) {
			runtime.Gosched()
		}
	}
	wg.Wait()
}

func BenchmarkKeyedThroughput(b *testing.B) {
	for _, s := range keyedSchemes() {
		b.Run(s.name, func(b *testing.B) {
			submit, closeFn := s.mk(b)
			defer closeFn()
			var done atomic.Int64
			all := make(chan struct{})
			n := int64(b.N)
			works := make([]wq.Work, b.N)
			for i := range works {
				works[i].Init(func() {
					spin(time.Microsecond)
					if done.Add(1) == n {
						close(all)
					}
				})
			}
			warm(submit)
			b.ResetTimer()
			for i := range works {
				for !submit(uint64(i%benchKeys), &works[i]) {
					runtime.Gosched()
				}
			}
			<-all
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
		})
	}
}

func BenchmarkKeyedColdBehindHot(b *testing.B) {
	const backlog, hotCost = 1000, 10 * time.Microsecond
	for _, s := range keyedSchemes() {
		b.Run(s.name, func(b *testing.B) {
			submit, closeFn := s.mk(b)
			var stop atomic.Bool
			var hot sync.WaitGroup
			var newHot func() *wq.Work
			newHot = func() *wq.Work {
				hot.Add(1)
				return wq.NewWork(func() {
					defer hot.Done()
					spin(hotCost)
					if !stop.Load() {
						submit(0, newHot()) // the hot key's stream goes on
					}
				})
			}
			warm(submit)
			for range backlog {
				submit(0, newHot())
			}
			var start atomic.Int64
			colds := make([]wq.Work, b.N) // one per item: a keyed Work may change keys only once idle
			for i := range colds {
				colds[i].Init(func() { start.Store(time.Now().UnixNano()) })
			}
			lat := make([]int64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start.Store(0)
				key := uint64(1 + i%(benchKeys-1))
				t0 := time.Now().UnixNano()
				for !submit(key, &colds[i]) {
					runtime.Gosched()
				}
				for start.Load() == 0 {
					runtime.Gosched()
				}
				lat = append(lat, start.Load()-t0)
				for colds[i].Busy() != 0 {
					runtime.Gosched()
				}
			}
			b.StopTimer()
			stop.Store(true)
			hot.Wait()
			closeFn()
			reportPercentiles(b, lat)
		})
	}
}

// reportPercentiles reports p50 and p99 of lat (ns), with no ratio to
// ants (the keyed schemes compare with each other).
func reportPercentiles(b *testing.B, lat []int64) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
}
