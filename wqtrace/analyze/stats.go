package analyze

import (
	"math"
	"slices"
)

// Stats summarises a set of durations. Every duration field is in
// microseconds (us), as float64 so that gowq's ns resolution survives;
// kernel captures have 1 us resolution. A Stats with Count 0 is all zeros.
//
// Percentiles use the nearest-rank method on the exact samples: Pxx is the
// smallest sample such that at least xx% of the samples are less than or
// equal to it (no interpolation, no histogram buckets). Stdev is the sample
// standard deviation (divisor Count-1, as fio prints it); 0 when Count < 2.
type Stats struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P95   float64 `json:"p95_us"`
	P98   float64 `json:"p98_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p99_9_us"`
	Max   float64 `json:"max_us"`
	Avg   float64 `json:"avg_us"`
	Stdev float64 `json:"stdev_us"`
}

// Samples accumulates durations in ns for Stats. The zero value is empty and
// ready to use. It is not safe for concurrent use.
type Samples struct {
	ns     []int64
	sorted bool
}

// Add records one duration in ns. Negative durations are recorded as 0.
func (s *Samples) Add(ns int64) {
	if ns < 0 {
		ns = 0
	}
	s.ns = append(s.ns, ns)
	s.sorted = false
}

// Len returns the number of recorded durations.
func (s *Samples) Len() int { return len(s.ns) }

// Values returns the recorded durations in ns, sorted ascending. The slice
// is shared with s until the next Add; do not modify it.
func (s *Samples) Values() []int64 {
	s.sort()
	return s.ns
}

func (s *Samples) sort() {
	if !s.sorted {
		slices.Sort(s.ns)
		s.sorted = true
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) in ns,
// or 0 when there are no samples. p outside (0, 100] is clamped.
func (s *Samples) Percentile(p float64) int64 {
	s.sort()
	return percentile(s.ns, p)
}

func percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// Nearest rank: ceil(p/100 * n), 1-based. The small epsilon keeps
	// ranks such as 0.9*10 = 9.000000000000002 from rounding up.
	r := int(math.Ceil(p/100*float64(n) - 1e-9))
	r = max(1, min(r, n))
	return sorted[r-1]
}

// Stats returns the summary of the recorded durations (see Stats).
func (s *Samples) Stats() Stats {
	s.sort()
	return statsOfSorted(s.ns)
}

// StatsOf returns the Stats of durations given in ns. It does not modify ns.
func StatsOf(ns []int64) Stats {
	var s Samples
	s.ns = slices.Clone(ns)
	for i, v := range s.ns {
		if v < 0 {
			s.ns[i] = 0
		}
	}
	return s.Stats()
}

func statsOfSorted(v []int64) Stats {
	n := len(v)
	if n == 0 {
		return Stats{}
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(n)
	var sq float64
	for _, x := range v {
		d := float64(x) - mean
		sq += d * d
	}
	var sd float64
	if n > 1 {
		sd = math.Sqrt(sq / float64(n-1))
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Stats{
		Count: n,
		Min:   us(v[0]),
		P50:   us(percentile(v, 50)),
		P90:   us(percentile(v, 90)),
		P95:   us(percentile(v, 95)),
		P98:   us(percentile(v, 98)),
		P99:   us(percentile(v, 99)),
		P999:  us(percentile(v, 99.9)),
		Max:   us(v[n-1]),
		Avg:   mean / 1e3,
		Stdev: sd / 1e3,
	}
}
