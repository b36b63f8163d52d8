package timer

import (
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// TestDeadlineSaturates catches a deadline that wraps past the int64
// range into the past (or the future) instead of saturating.
func TestDeadlineSaturates(t *testing.T) {
	cases := []struct {
		now  int64
		d    time.Duration
		want int64
	}{
		{1000, math.MaxInt64, math.MaxInt64},
		{1, math.MaxInt64, math.MaxInt64},
		{math.MaxInt64 - 5, 6, math.MaxInt64},
		{math.MaxInt64 - 5, 5, math.MaxInt64},
		{1 << 62, 1 << 62, math.MaxInt64},
		{-10, math.MinInt64, math.MinInt64},
		{math.MinInt64 + 5, -6, math.MinInt64},
		{1000, 5, 1005},
		{1000, -5, 995},
		{0, 0, 0},
	}
	for _, c := range cases {
		if got := Deadline(c.now, c.d); got != c.want {
			t.Errorf("Deadline(%d, %d) = %d, want %d", c.now, int64(c.d), got, c.want)
		}
	}
}

// TestHugeDelayDoesNotFire catches a timer armed with a delay near the
// int64 limit firing at once because now plus the delay wrapped.
func TestHugeDelayDoesNotFire(t *testing.T) {
	backends(t, func(t *testing.T, rt *RT) {
		for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64 / 2 * 2, 1<<63 - 1<<40} {
			var n atomic.Int32
			var tm Timer
			tm.Init(func() { n.Add(1) })
			tm.Reset(d, rt)
			// A wrapped deadline lies in the past: the RT thread would
			// fire it within microseconds of the arming.
			time.Sleep(20 * time.Millisecond)
			if !tm.Stop() {
				t.Errorf("delay %d: Stop = false: the timer was not armed any more", int64(d))
			}
			if got := n.Load(); got != 0 {
				t.Errorf("delay %d: fired %d times", int64(d), got)
			}
		}
	})
}
