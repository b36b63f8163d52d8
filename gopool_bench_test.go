package wq_test

import (
	"sync/atomic"
	"testing"

	"github.com/gowq/wq"
)

// BenchmarkRingUnbound queues empty items back to back through a ring of
// 64 on an unbound queue, as the lab's throughput scenario does.
func BenchmarkRingUnbound(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts []wq.Option
	}{{"default", nil}, {"threads", []wq.Option{wq.Threads()}}} {
		b.Run(tc.name, func(b *testing.B) {
			q, err := wq.Alloc("bench-ring", wq.Unbound, 0, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			var n atomic.Int64
			ring := make([]*wq.Work, 64)
			for i := range ring {
				ring[i] = wq.NewWork(func() { n.Add(1) })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i, queued := 0, 0; queued < b.N; i++ {
				if q.Queue(ring[i%len(ring)]) {
					queued++
				}
			}
			q.Flush()
		})
	}
}
