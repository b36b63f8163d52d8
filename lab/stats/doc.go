// Package stats collects latency samples for the wqlab experiments and
// reports them the way the seed documents do.
//
// # Samples
//
// A [Samples] records latencies in nanoseconds with [Samples.Add]. While
// the number of samples is at most [Samples.RawLimit] (default
// [DefaultRawLimit], 1Mi samples = 8 MiB) every sample is kept, and every
// figure in a [Summary] is exact. Past that bound the raw samples are folded
// into an HdrHistogram (github.com/HdrHistogram/hdrhistogram-go) that
// tracks 1 ns .. 10 s with 3 significant digits, so memory stays bounded
// (about 200 KiB) and percentiles become approximate (relative error at
// most 0.1%). Count, Min, Max, Avg and Stdev stay exact in both modes.
// [Summary.Exact] says which mode produced the percentiles.
//
// All figures of a [Summary] are in microseconds (float64). Definitions:
//
//   - Percentiles (Median, P90 ... P99.9, [Samples.Percentile], [Samples.CDF])
//     use linear interpolation between closest ranks, the definition of
//     numpy's default and of R's type 7: with the n samples sorted as
//     x[0] <= ... <= x[n-1], the p-th percentile is at the fractional
//     index h = (n-1)*p/100 and equals x[floor(h)] + (h-floor(h)) *
//     (x[floor(h)+1] - x[floor(h)]). For the samples 1..100 this gives
//     p50 = 50.5, p90 = 90.1, p99 = 99.01. In histogram mode the two
//     neighbours come from the histogram.
//   - Stdev is the sample standard deviation (divisor n-1), as fio prints
//     it; 0 for fewer than two samples.
//   - The fio block written by [WriteFioClat] uses fio's own definition
//     (nearest rank: the smallest sample with at least p% of the samples at
//     or below it) and fio's rounding, so that it reads like fio output.
//
// A Samples is not safe for concurrent use: give each measuring goroutine
// its own and [Samples.Merge] them at the end, which also keeps the hot path
// free of locks. Where one collector must be shared, [Locked] wraps a
// Samples with a mutex.
//
// # Timestamps
//
// [Now] returns a monotonic timestamp in nanoseconds since process start. It
// is comparable across goroutines and OS threads of one process (not across
// processes) and costs one vDSO clock read (about 20-40 ns; see
// BenchmarkNow). Scheduling latency, as in the seeds, is
// Now() at execute start minus Now() at queue time.
//
// # Change against a baseline
//
// [ChangePct] and [FormatPct] produce the "-76.96%" / "-77%" column of the
// seeds' tables.
package stats
