package timer

import (
	"math"
	"time"
)

// Deadline returns now+d (ns on one clock), saturated to the int64 range
// as the kernel clamps timeouts (MAX_JIFFY_OFFSET): a delay too long to
// represent means "never" for practical purposes, not a deadline that
// wrapped into the past and fires at once. Every deadline built from a
// caller's duration goes through it.
func Deadline(now int64, d time.Duration) int64 {
	switch {
	case d > 0 && now > math.MaxInt64-int64(d):
		return math.MaxInt64
	case d < 0 && now < math.MinInt64-int64(d):
		return math.MinInt64
	}
	return now + int64(d)
}
