package analyze

import (
	"fmt"
	"io"
	"math/bits"
	"strings"
)

// Log2Hist is a power-of-two histogram of durations in microseconds, the
// one bcc's runqlat and the kernel's BPF tools print. Buckets[0] counts
// 0..1 us, and Buckets[i] for i >= 1 counts 2^i .. 2^(i+1)-1 us: 0-1, 2-3,
// 4-7, 8-15, ... The zero value is empty and ready to use.
type Log2Hist struct {
	Buckets []uint64 `json:"buckets"`
}

// Bucket returns the index of the bucket that counts us.
func Bucket(us uint64) int {
	if us < 2 {
		return 0
	}
	return bits.Len64(us) - 1
}

// BucketRange returns the smallest and largest value (in us) of bucket i.
func BucketRange(i int) (lo, hi uint64) {
	if i <= 0 {
		return 0, 1
	}
	if i >= 63 {
		return 1 << 63, 1<<64 - 1
	}
	return 1 << i, 1<<(i+1) - 1
}

// AddNs records a duration given in ns (truncated to whole us, as runqlat
// does); negative durations count as 0.
func (h *Log2Hist) AddNs(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.Add(uint64(ns) / 1000)
}

// Add records a duration given in us.
func (h *Log2Hist) Add(us uint64) {
	i := Bucket(us)
	for len(h.Buckets) <= i {
		h.Buckets = append(h.Buckets, 0)
	}
	h.Buckets[i]++
}

// Total returns the number of recorded durations.
func (h *Log2Hist) Total() uint64 {
	var n uint64
	for _, c := range h.Buckets {
		n += c
	}
	return n
}

// WriteText writes the histogram exactly as bcc's print_log2_hist does,
// with unit as the value-type label (e.g. "usecs"): a header line, then one
// line per bucket from 0-1 up to the last non-empty one, with up to 40 stars
// scaled to the largest bucket. It writes nothing for an empty histogram. It
// returns the first write error.
func (h *Log2Hist) WriteText(w io.Writer, unit string) error {
	last, maxCount := -1, uint64(0)
	for i, c := range h.Buckets {
		if c > 0 {
			last = i
		}
		maxCount = max(maxCount, c)
	}
	if last < 0 {
		return nil
	}
	// bcc indexes buckets from 1 (our 0) and switches to wide columns
	// when its last index is above 32.
	header, body, width := "     %-19s : count     distribution\n", "%10d -> %-10d : %-8d |%-*s|\n", 40
	if last+1 > 32 {
		header, body, width = "               %-29s : count     distribution\n", "%20d -> %-20d : %-8d |%-*s|\n", 20
	}
	var b strings.Builder
	fmt.Fprintf(&b, header, unit)
	for i := 0; i <= last; i++ {
		lo, hi := BucketRange(i)
		c := h.Buckets[i]
		fmt.Fprintf(&b, body, lo, hi, c, width, strings.Repeat("*", stars(c, maxCount, width)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// stars is bcc's _stars: floor(width*val/max), at most width.
func stars(val, maxVal uint64, width int) int {
	if maxVal == 0 {
		return 0
	}
	n := int(float64(width) * float64(val) / float64(maxVal))
	return min(n, width)
}
