package stats_test

import (
	"fmt"
	"os"

	"github.com/gowq/wq/lab/stats"
)

// One latency per work item, queue -> execute start, as in the seeds.
func ExampleSamples() {
	var s stats.Samples
	for _, us := range []int64{3117, 14001, 15253, 16000, 30170} {
		queued := stats.Now()
		started := queued + us*1000 // a real run: stats.Now() in the worker
		s.Add(started - queued)
	}
	m := s.Summary()
	fmt.Printf("min %.0f median %.0f max %.0f us\n", m.Min, m.Median, m.Max)
	fmt.Println("avg change:", stats.FormatPct(stats.ChangePct(m.Avg, 3514), 2))
	// Output:
	// min 3117 median 15253 max 30170 us
	// avg change: -77.63%
}

func ExampleWriteFioClat() {
	s := stats.NewSamples(0)
	for i := int64(1); i <= 1000; i++ {
		s.Add(10_000 + i*i) // 10 us plus a quadratic tail
	}
	_ = stats.WriteFioClat(os.Stdout, s)
	// Output:
	//     clat (usec): min=10, max=1010, avg=343.83, stdev=298.57
	//     clat percentiles (usec):
	//      |  1.00th=[   11],  5.00th=[   13], 10.00th=[   20], 20.00th=[   50],
	//      | 30.00th=[  100], 40.00th=[  170], 50.00th=[  260], 60.00th=[  370],
	//      | 70.00th=[  500], 80.00th=[  650], 90.00th=[  820], 95.00th=[  913],
	//      | 99.00th=[  991], 99.50th=[ 1001], 99.90th=[ 1009], 99.95th=[ 1010],
	//      | 99.99th=[ 1010]
}
