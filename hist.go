package wq

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// latencyHist is a lock-free log-linear histogram of durations in ns: each
// power of two is split into 8 sub-buckets, so a percentile read from it is
// within 12.5% of the true value. Observing is two atomic adds and never
// allocates, so it stays on the hot path.
type latencyHist struct {
	counts [64 * histSub]atomic.Int64
	sum    atomic.Int64
	max    atomic.Int64
}

const histSubBits = 3
const histSub = 1 << histSubBits

func histIndex(ns int64) int {
	if ns < histSub {
		if ns < 0 {
			ns = 0
		}
		return int(ns)
	}
	e := 63 - bits.LeadingZeros64(uint64(ns)) // >= histSubBits
	sub := int(ns>>(e-histSubBits)) & (histSub - 1)
	return (e-histSubBits+1)*histSub + sub
}

// histLower returns the smallest ns value that falls in bucket i.
func histLower(i int) int64 {
	if i < histSub {
		return int64(i)
	}
	e := i/histSub + histSubBits - 1
	sub := i % histSub
	return (1 << e) | int64(sub)<<(e-histSubBits)
}

func (h *latencyHist) observe(ns int64) {
	h.counts[histIndex(ns)].Add(1)
	h.sum.Add(ns)
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			return
		}
	}
}

// HistSnapshot is a copy of a latency histogram. Values are in ns.
type HistSnapshot struct {
	Count int64
	SumNs int64
	MaxNs int64
	// Buckets holds (lower bound ns, count) for each non-empty bucket, in
	// increasing order. A bucket spans [lower, next lower).
	Buckets []HistBucket
}

// HistBucket is one bucket of a HistSnapshot.
type HistBucket struct {
	LowerNs int64
	Count   int64
}

func (h *latencyHist) snapshot() HistSnapshot {
	var s HistSnapshot
	for i := range h.counts {
		if c := h.counts[i].Load(); c > 0 {
			s.Buckets = append(s.Buckets, HistBucket{LowerNs: histLower(i), Count: c})
			s.Count += c
		}
	}
	s.SumNs = h.sum.Load()
	s.MaxNs = h.max.Load()
	return s
}

// Quantile returns the q-quantile (0 <= q <= 1) in ns, as the upper bound
// of the bucket that holds it (the max for q = 1), or 0 when empty.
func (s HistSnapshot) Quantile(q float64) int64 {
	if s.Count == 0 {
		return 0
	}
	if q >= 1 {
		return s.MaxNs
	}
	rank := int64(math.Ceil(q * float64(s.Count)))
	if rank < 1 {
		rank = 1
	}
	var acc int64
	for _, b := range s.Buckets {
		acc += b.Count
		if acc >= rank {
			hi := histLower(histIndex(b.LowerNs)+1) - 1
			if hi > s.MaxNs {
				hi = s.MaxNs
			}
			return hi
		}
	}
	return s.MaxNs
}

// MeanNs returns the mean in ns, 0 when empty.
func (s HistSnapshot) MeanNs() float64 {
	if s.Count == 0 {
		return 0
	}
	return float64(s.SumNs) / float64(s.Count)
}

func (h *latencyHist) addFrom(o *latencyHist) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	h.sum.Add(o.sum.Load())
	for {
		m, om := h.max.Load(), o.max.Load()
		if om <= m || h.max.CompareAndSwap(m, om) {
			return
		}
	}
}
