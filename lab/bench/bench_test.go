package bench_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/panjf2000/ants/v2"

	"github.com/gowq/wq"
)

// Benchmarks. Latency benchmarks report p50/p99 queue-to-start in ns with
// b.ReportMetric; every sub-benchmark of BenchmarkQueueToStart runs in the
// same process under the same conditions, so compare their ratios:
//
//	go test -run '^$' -bench 'QueueToStart|Throughput' -benchtime 20000x ./lab/bench
//
// The ants/v2 sub-benchmarks run first, and the others report their
// ratio to ants in the same run (x-ants, p50-x-ants, p99-x-ants).

type submitter interface {
	submit(fn func())
	close()
}

type chanPool struct {
	ch chan func()
	wg sync.WaitGroup
}

func newChanPool(n int) *chanPool {
	p := &chanPool{ch: make(chan func(), 1024)}
	for i := 0; i < n; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for fn := range p.ch {
				fn()
			}
		}()
	}
	return p
}

func (p *chanPool) submit(fn func()) { p.ch <- fn }
func (p *chanPool) close()           { close(p.ch); p.wg.Wait() }

type antsPool struct{ p *ants.Pool }

func (a antsPool) submit(fn func()) { _ = a.p.Submit(fn) }
func (a antsPool) close()           { a.p.Release() }

// antsRef holds ants/v2's figures from the last run of its sub-benchmark
// in this process, so that the other sub-benchmarks of the same run can
// report their ratio to it (ratios against ants, same run). The
// ants sub-benchmarks run first; when a -bench filter leaves them out,
// no ratio is reported.
var antsRef struct{ p50, p99, rate float64 } // ns, ns, items/s

// reportLatency reports p50 and p99 in ns and, when ants/v2 was measured
// in this run, both as multiples of ants'. ref stores them as ants'.
func reportLatency(b *testing.B, lat []int64, ref bool) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := float64(lat[len(lat)/2]), float64(lat[len(lat)*99/100])
	b.ReportMetric(p50, "p50-ns")
	b.ReportMetric(p99, "p99-ns")
	if ref {
		antsRef.p50, antsRef.p99 = p50, p99
	}
	if antsRef.p50 > 0 && antsRef.p99 > 0 {
		b.ReportMetric(p50/antsRef.p50, "p50-x-ants")
		b.ReportMetric(p99/antsRef.p99, "p99-x-ants")
	}
}

// reportRate reports items/s and, when ants/v2 was measured in this run,
// the rate as a multiple of ants'. ref stores it as ants'.
func reportRate(b *testing.B, items int64, ref bool) {
	rate := float64(items) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "items/s")
	if ref {
		antsRef.rate = rate
	}
	if antsRef.rate > 0 {
		b.ReportMetric(rate/antsRef.rate, "x-ants")
	}
}

// BenchmarkQueueToStart: time from just before the queue call to the first
// instruction of the work function, one item at a time; ants/v2 first,
// then the other executors and the gowq classes with their ratios to it.
func BenchmarkQueueToStart(b *testing.B) {
	antsRef = struct{ p50, p99, rate float64 }{} // ratios only against this run's ants
	pools := []struct {
		name string
		mk   func() submitter
	}{
		{"ants", func() submitter {
			p, _ := ants.NewPool(runtime.GOMAXPROCS(0))
			return antsPool{p}
		}},
		{"chan-pool", func() submitter { return newChanPool(runtime.GOMAXPROCS(0)) }},
		{"go", func() submitter { return goStmt{} }},
		{"pond", func() submitter { return pondPool{pond.NewPool(runtime.GOMAXPROCS(0))} }},
	}
	for _, pc := range pools {
		b.Run(pc.name, func(b *testing.B) {
			p := pc.mk()
			defer p.close()
			var start atomic.Int64
			fn := func() { start.Store(time.Now().UnixNano()) }
			lat := make([]int64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start.Store(0)
				t0 := time.Now().UnixNano()
				p.submit(fn)
				for start.Load() == 0 {
					runtime.Gosched()
				}
				lat = append(lat, start.Load()-t0)
			}
			b.StopTimer()
			reportLatency(b, lat, pc.name == "ants")
		})
	}
	classes := []struct {
		name  string
		flags wq.Flags
	}{
		{"wq-normal-percpu", wq.PerCPU},
		{"wq-normal-unbound", wq.Unbound},
		{"wq-highpri-percpu", wq.PerCPU | wq.HighPri},
		{"wq-rt-percpu", wq.PerCPU | wq.RT},
		{"wq-rt-unbound", wq.Unbound | wq.RT},
	}
	for _, c := range classes {
		b.Run(c.name, func(b *testing.B) {
			q, err := wq.Alloc("bench", c.flags, 0)
			if err != nil {
				b.Skip(err)
			}
			defer q.Destroy()
			var start atomic.Int64
			w := wq.NewWork(func() { start.Store(time.Now().UnixNano()) })
			lat := make([]int64, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start.Store(0)
				t0 := time.Now().UnixNano()
				q.Queue(w)
				for start.Load() == 0 {
					runtime.Gosched()
				}
				lat = append(lat, start.Load()-t0)
				for w.Busy() != 0 {
					runtime.Gosched()
				}
			}
			b.StopTimer()
			reportLatency(b, lat, false)
		})
	}
}

// BenchmarkThroughputRing: the throughput row: one producer queues
// empty items back to back through a ring of 64 work items (a gowq item
// still pending is skipped for the next one), one op per item; reports
// items/s, its ratio to ants/v2 in the same run (ants runs first),
// allocations per item and the process's CPU seconds per million items
// (getrusage). The lab's `wqlab --scenario throughput` prints the same,
// interleaved, with idle latencies.
func BenchmarkThroughputRing(b *testing.B) {
	antsRef = struct{ p50, p99, rate float64 }{} // ratios only against this run's ants
	pools := []struct {
		name string
		mk   func() submitter
	}{
		{"ants", func() submitter {
			p, _ := ants.NewPool(runtime.GOMAXPROCS(0))
			return antsPool{p}
		}},
		{"chan-pool", func() submitter { return newChanPool(runtime.GOMAXPROCS(0)) }},
		{"go", func() submitter { return goStmt{} }},
		{"pond", func() submitter { return pondPool{pond.NewPool(runtime.GOMAXPROCS(0))} }},
	}
	for _, pc := range pools {
		b.Run(pc.name, func(b *testing.B) {
			p := pc.mk()
			defer p.close()
			var done atomic.Int64
			fin := make(chan struct{}, 1)
			goal := int64(b.N)
			fn := func() {
				if done.Add(1) == goal {
					fin <- struct{}{}
				}
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.submit(fn)
			}
			<-fin
			b.StopTimer()
			reportRate(b, done.Load(), pc.name == "ants")
			b.ReportMetric(float64(processCPU()-cpu0)/1e9/float64(b.N)*1e6, "cpu-s/M-items")
		})
	}
	classes := []struct {
		name  string
		flags wq.Flags
	}{
		{"wq-normal-percpu", wq.PerCPU},
		{"wq-normal-unbound", wq.Unbound},
		{"wq-highpri-percpu", wq.PerCPU | wq.HighPri},
		{"wq-rt-percpu", wq.PerCPU | wq.RT},
		{"wq-rt-unbound", wq.Unbound | wq.RT},
	}
	for _, c := range classes {
		b.Run(c.name, func(b *testing.B) {
			q, err := wq.Alloc("bench-ring", c.flags, 0)
			if err != nil {
				b.Skip(err)
			}
			defer q.Destroy()
			var done atomic.Int64
			fin := make(chan struct{}, 1)
			goal := int64(b.N)
			fn := func() {
				if done.Add(1) == goal {
					fin <- struct{}{}
				}
			}
			ring := make([]*wq.Work, 64)
			for i := range ring {
				ring[i] = wq.NewWork(fn)
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i, queued := 0, 0; queued < b.N; i++ {
				if q.Queue(ring[i%len(ring)]) {
					queued++
				}
			}
			<-fin
			b.StopTimer()
			reportRate(b, done.Load(), false)
			b.ReportMetric(float64(processCPU()-cpu0)/1e9/float64(b.N)*1e6, "cpu-s/M-items")
		})
	}
}

// processCPU returns the process's user+system CPU time in ns
// (getrusage(RUSAGE_SELF)).
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type goStmt struct{}

func (goStmt) submit(fn func()) { go fn() }
func (goStmt) close()           {}

type pondPool struct{ p pond.Pool }

func (p pondPool) submit(fn func()) { p.p.Submit(fn) }
func (p pondPool) close()           { p.p.StopAndWait() }

// BenchmarkThroughput: empty items queued as fast as possible from
// GOMAXPROCS goroutines, each with its own items; reports items/s.
func BenchmarkThroughput(b *testing.B) {
	antsRef = struct{ p50, p99, rate float64 }{} // ratios only against this run's ants
	b.Run("ants", func(b *testing.B) {
		ap, _ := ants.NewPool(runtime.GOMAXPROCS(0))
		var done atomic.Int64
		var wg sync.WaitGroup
		fn := func() { done.Add(1); wg.Done() }
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				wg.Add(1)
				_ = ap.Submit(fn)
			}
		})
		wg.Wait()
		ap.Release()
		b.StopTimer()
		reportRate(b, done.Load(), true)
	})
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"wq-percpu", wq.PerCPU}, {"wq-unbound", wq.Unbound}} {
		b.Run(c.name, func(b *testing.B) {
			q, err := wq.Alloc("tput", c.flags, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			var done atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				works := make([]*wq.Work, 64)
				for i := range works {
					works[i] = wq.NewWork(func() { done.Add(1) })
				}
				i := 0
				for pb.Next() {
					for !q.Queue(works[i%len(works)]) {
						i++
					}
					i++
				}
			})
			q.Flush()
			b.StopTimer()
			reportRate(b, done.Load(), false)
		})
	}
	b.Run("chan-pool", func(b *testing.B) {
		p := newChanPool(runtime.GOMAXPROCS(0))
		var done atomic.Int64
		fn := func() { done.Add(1) }
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p.submit(fn)
			}
		})
		p.close()
		b.StopTimer()
		reportRate(b, done.Load(), false)
	})
}

// BenchmarkQueueAllocs: Queue of a pre-initialised, idle Work.
func BenchmarkQueueAllocs(b *testing.B) {
	q, err := wq.Alloc("allocs", wq.PerCPU, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	w := wq.NewWork(func() {})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for w.Busy() != 0 {
			runtime.Gosched()
		}
		q.Queue(w)
	}
}

// BenchmarkBlockingBurst: bursts of N items that each block 1 ms (issue
// 12), per queue class and a go statement per item; one op is one burst,
// from the first Queue to Flush returning, on the same queue (warm after
// the first). Compare the ms/burst of the sub-benchmarks, all from one run:
//
//	go test -run '^$' -bench BlockingBurst -benchtime 5x ./lab/bench
//
// The lab's `wqlab --scenario blocking` prints the same with cold bursts,
// ratios and the CM monitor's CPU cost.
func BenchmarkBlockingBurst(b *testing.B) {
	configs := []struct {
		name  string
		flags wq.Flags
	}{
		{"percpu-normal", wq.PerCPU},
		{"percpu-rt", wq.PerCPU | wq.RT},
		{"unbound-normal", wq.Unbound},
		{"unbound-rt", wq.Unbound | wq.RT},
		{"go", 0},
	}
	kinds := []struct {
		name  string
		block func()
	}{
		{"sleep", func() { time.Sleep(time.Millisecond) }},
		{"nanosleep", func() {
			ts := syscall.NsecToTimespec(int64(time.Millisecond))
			for syscall.Nanosleep(&ts, &ts) == syscall.EINTR {
			}
		}},
		{"pipe", nil},
	}
	for _, k := range kinds {
		for _, n := range []int{10, 100, 1000} {
			for _, c := range configs {
				b.Run(fmt.Sprintf("%s/N=%d/%s", k.name, n, c.name), func(b *testing.B) {
					var q *wq.Workqueue
					if c.name != "go" {
						var err error
						if q, err = wq.Alloc("bench-blocking", c.flags, 0); err != nil {
							b.Skip(err)
						}
						defer q.Destroy()
					}
					var total time.Duration
					for i := 0; i < b.N; i++ {
						fns, done := blockingItems(k.block, n)
						t0 := time.Now()
						if q != nil {
							for _, fn := range fns {
								q.Queue(wq.NewWork(fn))
							}
							q.Flush()
						} else {
							var wg sync.WaitGroup
							wg.Add(n)
							for _, fn := range fns {
								go func() { fn(); wg.Done() }()
							}
							wg.Wait()
						}
						total += time.Since(t0)
						done()
					}
					b.ReportMetric(float64(total)/float64(b.N)/1e6, "ms/burst")
				})
			}
		}
	}
}

// blockingItems returns n functions that each block 1 ms with block, or,
// when block is nil, with a blocking read(2) on a pipe whose byte a timer
// writes 1 ms after the read starts; done closes the pipes.
func blockingItems(block func(), n int) (fns []func(), done func()) {
	fns = make([]func(), n)
	var fds [][2]int
	for i := range fns {
		if block != nil {
			fns[i] = block
			continue
		}
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			panic(err)
		}
		fds = append(fds, p)
		fns[i] = func() {
			time.AfterFunc(time.Millisecond, func() { _, _ = syscall.Write(p[1], []byte{1}) })
			var buf [1]byte
			for {
				if _, err := syscall.Read(p[0], buf[:]); err != syscall.EINTR {
					return
				}
			}
		}
	}
	return fns, func() {
		for _, p := range fds {
			syscall.Close(p[0])
			syscall.Close(p[1])
		}
	}
}
