package kthread_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
)

var benchEpoch = time.Now()

func nowNs() int64 { return int64(time.Since(benchEpoch)) }

func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i])
}

// BenchmarkQueueToStart measures the latency from queueing an item to the
// moment its function starts (DESIGN-NOTES' "scheduling latency"), one item
// at a time so that the worker is idle (parked) at each queue, and reports
// p50/p99 in ns for a kthread Worker (futex wake), for a SCHED_FIFO-low
// kthread Worker when permitted, and for a goroutine reading a channel, the
// usual Go baseline, in the same run. Compare the ratios, not the absolute
// numbers: the machines are noisy.
func BenchmarkQueueToStart(b *testing.B) {
	wk, err := kthread.CreateWorker("kt-bench")
	if err != nil {
		b.Fatal(err)
	}
	defer wk.Destroy()
	var rt *kthread.Worker
	if sched.CheckRT(kthread.FIFOLowPriority) == nil {
		if rt, err = kthread.CreateWorker("kt-bench-rt", kthread.WithFIFOLow()); err != nil {
			b.Fatal(err)
		}
		defer rt.Destroy()
	}

	var t0 atomic.Int64
	var lat int64
	done := make(chan struct{}, 1)
	start := func() {
		lat = nowNs() - t0.Load()
		done <- struct{}{}
	}
	// One item per worker: an item that has signalled is still running on
	// its worker for a moment, and may not be queued on another meanwhile.
	w, wRT := kthread.NewWork(start), kthread.NewWork(start)

	ch := make(chan func(), 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		for f := range ch {
			f()
		}
	}()
	defer func() { close(ch); <-exited }()

	kt := make([]int64, 0, b.N)
	ktRT := make([]int64, 0, b.N)
	chn := make([]int64, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0.Store(nowNs())
		if !wk.QueueWork(w) {
			b.Fatal("QueueWork = false")
		}
		<-done
		kt = append(kt, lat)

		if rt != nil {
			t0.Store(nowNs())
			if !rt.QueueWork(wRT) {
				b.Fatal("QueueWork(RT) = false")
			}
			<-done
			ktRT = append(ktRT, lat)
		}

		t0.Store(nowNs())
		ch <- start
		<-done
		chn = append(chn, lat)
	}
	b.StopTimer()
	for _, s := range [][]int64{kt, ktRT, chn} {
		slices.Sort(s)
	}
	b.ReportMetric(percentile(kt, 0.50), "kthread-p50-ns")
	b.ReportMetric(percentile(kt, 0.99), "kthread-p99-ns")
	if rt != nil {
		b.ReportMetric(percentile(ktRT, 0.50), "fifolow-p50-ns")
		b.ReportMetric(percentile(ktRT, 0.99), "fifolow-p99-ns")
	}
	b.ReportMetric(percentile(chn, 0.50), "chan-p50-ns")
	b.ReportMetric(percentile(chn, 0.99), "chan-p99-ns")
}

// BenchmarkQueueWork measures the cost of QueueWork itself on a busy
// worker (the item is already pending most of the time, as in a hot
// producer), and checks that it does not allocate.
func BenchmarkQueueWork(b *testing.B) {
	wk, err := kthread.CreateWorker("kt-benchq")
	if err != nil {
		b.Fatal(err)
	}
	defer wk.Destroy()
	w := kthread.NewWork(func() {})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wk.QueueWork(w)
	}
	b.StopTimer()
	wk.FlushWorker()
}
