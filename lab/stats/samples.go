package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// DefaultRawLimit is the number of raw samples a [Samples] keeps when its
// RawLimit field is 0: 1Mi samples, 8 MiB.
const DefaultRawLimit = 1 << 20

// Histogram geometry used once a [Samples] overflows its raw limit.
const (
	histLowestNs  = 1                    // 1 ns resolution at the bottom
	histHighestNs = 10_000_000_000       // 10 s
	histSigDigits = 3                    // 0.1% relative error
	nsPerUs       = 1000.0               // ns per us
	maxTrackedNs  = int64(histHighestNs) // values above are clamped in the histogram
)

// Errors returned by this package; test with errors.Is.
var (
	// ErrNoSamples is returned by functions that need at least one sample.
	ErrNoSamples = errors.New("stats: no samples")
	// ErrBadArgument is returned for an out-of-range argument (a percentile
	// outside [0, 100], fewer than 2 CDF points, a nil writer).
	ErrBadArgument = errors.New("stats: bad argument")
)

// Samples collects latency samples in nanoseconds. The zero value is ready
// to use. It is not safe for concurrent use; see [Locked] and
// [Samples.Merge].
type Samples struct {
	// RawLimit is the number of samples kept raw (exact percentiles). 0
	// means DefaultRawLimit; a negative value keeps none and uses the
	// histogram from the first sample. Set it before the first Add; it is
	// read on every Add and Merge.
	RawLimit int

	n          int64   // number of samples
	minNs      int64   // exact minimum (valid when n > 0)
	maxNs      int64   // exact maximum (valid when n > 0)
	mean       float64 // running mean in ns (Welford)
	m2         float64 // running sum of squared deviations in ns^2 (Welford)
	outOfRange int64   // samples clamped: negative, or above 10 s in the histogram

	raw    []int64 // all samples while hist == nil
	sorted bool    // raw is sorted ascending
	hist   *hdrhistogram.Histogram
}

// NewSamples returns an empty Samples that keeps up to rawLimit raw samples
// (0: DefaultRawLimit, negative: none). It never fails and does not block.
func NewSamples(rawLimit int) *Samples {
	return &Samples{RawLimit: rawLimit}
}

func (s *Samples) rawLimit() int {
	if s.RawLimit == 0 {
		return DefaultRawLimit
	}
	return s.RawLimit
}

// Add records one latency sample in nanoseconds. A negative value (a clock
// went backwards or the caller mixed up its operands) is recorded as 0 and
// counted in Summary.OutOfRange. Add does not block; it allocates only
// when the raw slice grows, and once when the histogram is created.
func (s *Samples) Add(ns int64) {
	if ns < 0 {
		ns = 0
		s.outOfRange++
	}
	if s.n == 0 {
		s.minNs, s.maxNs = ns, ns
	} else {
		s.minNs = min(s.minNs, ns)
		s.maxNs = max(s.maxNs, ns)
	}
	s.n++
	d := float64(ns) - s.mean
	s.mean += d / float64(s.n)
	s.m2 += d * (float64(ns) - s.mean)

	if s.hist == nil && len(s.raw) < s.rawLimit() {
		if len(s.raw) == 0 {
			s.sorted = true
		} else if ns < s.raw[len(s.raw)-1] {
			s.sorted = false
		}
		s.raw = append(s.raw, ns)
		return
	}
	s.toHist()
	s.record(ns, 1)
}

// toHist switches s to histogram mode, folding in the raw samples.
func (s *Samples) toHist() {
	if s.hist != nil {
		return
	}
	s.hist = hdrhistogram.New(histLowestNs, histHighestNs, histSigDigits)
	for _, v := range s.raw {
		s.record(v, 1)
	}
	s.raw, s.sorted = nil, false
}

func (s *Samples) record(ns, count int64) {
	if ns > maxTrackedNs {
		ns = maxTrackedNs
		s.outOfRange += count
	}
	// Cannot fail: 0 <= ns <= highest trackable value.
	_ = s.hist.RecordValues(ns, count)
}

// Len returns the number of samples recorded so far.
func (s *Samples) Len() int64 { return s.n }

// Exact reports whether all samples are kept raw, so that percentiles are
// exact.
func (s *Samples) Exact() bool { return s.hist == nil }

// Reset forgets all samples; RawLimit is kept.
func (s *Samples) Reset() {
	*s = Samples{RawLimit: s.RawLimit}
}

// Clone returns an independent deep copy of s.
func (s *Samples) Clone() *Samples {
	c := *s
	c.raw = slices.Clone(s.raw)
	if s.hist != nil {
		c.hist = s.hist.Clone()
	}
	return &c
}

// Merge adds every sample of o to s; o is not modified (o may be s, which
// doubles every sample). A nil o is a no-op. The result is exact when
// both are exact and the combined count fits s's RawLimit; otherwise s
// switches to histogram mode.
func (s *Samples) Merge(o *Samples) {
	if o == nil || o.n == 0 {
		return
	}
	if o == s {
		o = s.Clone()
	}
	// Combine the moments (Chan et al.).
	if s.n == 0 {
		s.minNs, s.maxNs = o.minNs, o.maxNs
	} else {
		s.minNs = min(s.minNs, o.minNs)
		s.maxNs = max(s.maxNs, o.maxNs)
	}
	na, nb := float64(s.n), float64(o.n)
	n := na + nb
	d := o.mean - s.mean
	s.mean += d * nb / n
	s.m2 += o.m2 + d*d*na*nb/n
	s.n += o.n
	s.outOfRange += o.outOfRange

	if s.hist == nil && o.hist == nil && len(s.raw)+len(o.raw) <= s.rawLimit() {
		if len(s.raw) > 0 {
			s.sorted = false
		} else {
			s.sorted = o.sorted
		}
		s.raw = append(s.raw, o.raw...)
		return
	}
	s.toHist()
	if o.hist != nil {
		s.hist.Merge(o.hist)
		return
	}
	for _, v := range o.raw {
		s.record(v, 1)
	}
}

// valueAtRank returns the k-th smallest sample in ns, 1 <= k <= n.
// In histogram mode it is the highest value equivalent to that sample.
func (s *Samples) valueAtRank(k int64) int64 {
	k = min(max(k, 1), s.n)
	if s.hist == nil {
		s.sort()
		return s.raw[k-1]
	}
	if k == 1 {
		return s.minNs
	}
	if k == s.n {
		return s.maxNs
	}
	// hdrhistogram picks rank int(q/100*n + 0.5); aim at k+0.25.
	v := s.hist.ValueAtPercentile(100 * (float64(k) - 0.25) / float64(s.n))
	return min(max(v, s.minNs), s.maxNs)
}

func (s *Samples) sort() {
	if !s.sorted {
		slices.Sort(s.raw)
		s.sorted = true
	}
}

// percentileNs is the interpolated percentile in ns (see package doc);
// s.n > 0 and 0 <= p <= 100.
func (s *Samples) percentileNs(p float64) float64 {
	h := float64(s.n-1) * p / 100
	lo := math.Floor(h)
	k := int64(lo) + 1 // 1-based rank of x[floor(h)]
	a := float64(s.valueAtRank(k))
	if frac := h - lo; frac > 0 && k < s.n {
		b := float64(s.valueAtRank(k + 1))
		return a + frac*(b-a)
	}
	return a
}

// nearestRankNs is fio's percentile: the smallest sample with at least p%
// of the samples at or below it; s.n > 0.
func (s *Samples) nearestRankNs(p float64) int64 {
	// p*n is exact for the usual percentiles; the epsilon keeps float
	// noise (1.0000000000000002) from moving to the next rank.
	k := int64(math.Ceil(p*float64(s.n)/100 - 1e-9))
	return s.valueAtRank(k)
}

// Percentile returns the p-th percentile (0 <= p <= 100) in microseconds,
// by linear interpolation between closest ranks (see the package doc).
// It returns ErrNoSamples when s is empty and ErrBadArgument when p is out
// of range or NaN. It may sort the retained raw samples (O(n log n) once
// after new samples arrived).
func (s *Samples) Percentile(p float64) (float64, error) {
	if !(p >= 0 && p <= 100) {
		return 0, fmt.Errorf("%w: percentile %v not in [0, 100]", ErrBadArgument, p)
	}
	if s.n == 0 {
		return 0, ErrNoSamples
	}
	return s.percentileNs(p) / nsPerUs, nil
}

// Summary is the set of figures the seeds report. All latency fields are in
// microseconds. For an empty Samples every field is zero.
type Summary struct {
	Count  int64   // number of samples
	Min    float64 // smallest sample, us (exact)
	Median float64 // 50th percentile (P50), us
	Avg    float64 // arithmetic mean, us (exact)
	Max    float64 // largest sample, us (exact)
	Stdev  float64 // sample standard deviation (n-1), us
	P90    float64 // 90th percentile, us
	P95    float64 // 95th percentile, us
	P98    float64 // 98th percentile, us
	P99    float64 // 99th percentile, us
	P999   float64 // 99.9th percentile, us

	// Exact is true when the percentiles were computed from every raw
	// sample, false when they come from the histogram (within 0.1%).
	Exact bool
	// OutOfRange counts samples that were clamped: negative ones (to 0)
	// and, in histogram mode, ones above 10 s (to 10 s, for the
	// percentiles only; Max stays exact).
	OutOfRange int64
}

// Summary computes the figures of s (see [Summary] and the package doc for
// definitions). It does not modify the recorded data, but may sort the
// retained raw samples in place, which is why it is not safe concurrently
// with any other method.
func (s *Samples) Summary() Summary {
	if s.n == 0 {
		return Summary{Exact: true}
	}
	sum := Summary{
		Count:      s.n,
		Min:        float64(s.minNs) / nsPerUs,
		Max:        float64(s.maxNs) / nsPerUs,
		Exact:      s.hist == nil,
		OutOfRange: s.outOfRange,
	}
	mean, m2 := s.mean, s.m2
	if s.hist == nil {
		// Two-pass over the raw samples for full precision.
		var total float64
		for _, v := range s.raw {
			total += float64(v)
		}
		mean = total / float64(len(s.raw))
		m2 = 0
		for _, v := range s.raw {
			d := float64(v) - mean
			m2 += d * d
		}
	}
	sum.Avg = mean / nsPerUs
	if s.n > 1 {
		sum.Stdev = math.Sqrt(m2/float64(s.n-1)) / nsPerUs
	}
	sum.Median = s.percentileNs(50) / nsPerUs
	sum.P90 = s.percentileNs(90) / nsPerUs
	sum.P95 = s.percentileNs(95) / nsPerUs
	sum.P98 = s.percentileNs(98) / nsPerUs
	sum.P99 = s.percentileNs(99) / nsPerUs
	sum.P999 = s.percentileNs(99.9) / nsPerUs
	return sum
}

// String formats the summary on one line, all values in us with two
// decimals, e.g. "n=100 min=1.00 p50=50.50 avg=50.50 max=100.00
// stdev=29.01 p90=... p95=... p98=... p99=... p99.9=... (us)".
func (m Summary) String() string {
	return fmt.Sprintf("n=%d min=%.2f p50=%.2f avg=%.2f max=%.2f stdev=%.2f p90=%.2f p95=%.2f p98=%.2f p99=%.2f p99.9=%.2f (us)",
		m.Count, m.Min, m.Median, m.Avg, m.Max, m.Stdev, m.P90, m.P95, m.P98, m.P99, m.P999)
}

// CDF returns points (>= 2) points of the empirical cumulative distribution
// for plotting: ys[i] = i/(points-1) runs evenly from 0 to 1 and xs[i] is
// the ys[i]-quantile in microseconds (interpolated as [Samples.Percentile]),
// so xs[0] is the minimum and xs[points-1] the maximum. It returns
// ErrBadArgument when points < 2 and ErrNoSamples when s is empty.
func (s *Samples) CDF(points int) (xsUs, ys []float64, err error) {
	if points < 2 {
		return nil, nil, fmt.Errorf("%w: CDF needs at least 2 points, got %d", ErrBadArgument, points)
	}
	if s.n == 0 {
		return nil, nil, ErrNoSamples
	}
	xsUs = make([]float64, points)
	ys = make([]float64, points)
	for i := range points {
		q := float64(i) / float64(points-1)
		ys[i] = q
		xsUs[i] = s.percentileNs(100*q) / nsPerUs
	}
	return xsUs, ys, nil
}

// Locked is a [Samples] guarded by a mutex, for the case where several
// goroutines must feed one collector. Every method is safe for concurrent
// use and blocks only for the mutex. The zero value is ready to use (with
// DefaultRawLimit). Per-goroutine Samples merged at the end are cheaper.
type Locked struct {
	mu sync.Mutex
	s  Samples // guarded by mu
}

// NewLocked returns an empty Locked keeping up to rawLimit raw samples (see
// [NewSamples]).
func NewLocked(rawLimit int) *Locked {
	return &Locked{s: Samples{RawLimit: rawLimit}}
}

// Add records one sample in ns, as [Samples.Add].
func (l *Locked) Add(ns int64) {
	l.mu.Lock()
	l.s.Add(ns)
	l.mu.Unlock()
}

// Merge adds every sample of o, as [Samples.Merge]; o must not be modified
// concurrently.
func (l *Locked) Merge(o *Samples) {
	l.mu.Lock()
	l.s.Merge(o)
	l.mu.Unlock()
}

// Summary returns the summary of the samples so far, as [Samples.Summary].
func (l *Locked) Summary() Summary {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Summary()
}

// Snapshot returns an independent copy of the samples so far.
func (l *Locked) Snapshot() *Samples {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Clone()
}
