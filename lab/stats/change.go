package stats

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ChangePct returns the change from base to v in percent,
// (v - base) / base * 100: ChangePct(15253, 3514) = -76.96... . It returns
// NaN when base is 0 or either argument is NaN, since no change can be
// stated then.
func ChangePct(base, v float64) float64 {
	if base == 0 || math.IsNaN(base) || math.IsNaN(v) {
		return math.NaN()
	}
	return (v - base) / base * 100
}

// FormatPct formats a change in percent as the seeds' tables do: an
// explicit sign, decimals digits after the point (clamped to 0..6) and a
// "%" suffix: FormatPct(-76.96, 0) = "-77%", FormatPct(-76.96, 2) =
// "-76.96%", FormatPct(12.3, 0) = "+12%". A value that rounds to zero is
// printed without sign ("0%", "0.00%"); NaN and infinities give "n/a".
func FormatPct(pct float64, decimals int) string {
	if math.IsNaN(pct) || math.IsInf(pct, 0) {
		return "n/a"
	}
	decimals = min(max(decimals, 0), 6)
	s := strconv.FormatFloat(pct, 'f', decimals, 64)
	if strings.Trim(s, "-0.") == "" { // rounds to zero, maybe "-0.00"
		return strings.TrimPrefix(s, "-") + "%"
	}
	if pct > 0 {
		s = "+" + s
	}
	return s + "%"
}

// epoch is the process-wide origin of Now; it carries a monotonic reading.
var epoch = time.Now()

// Now returns a monotonic timestamp in nanoseconds since this package was
// initialised. It reads CLOCK_MONOTONIC through the Go runtime (a vDSO call,
// no system call, about 20-40 ns; see BenchmarkNow), never goes backwards,
// is unaffected by wall-clock changes, and is comparable between goroutines
// and OS threads of one process, so a queue-to-start latency is
// Now() at start minus Now() at queue time. Values from different
// processes are not comparable. Safe for concurrent use; does not
// allocate or block.
func Now() int64 {
	return int64(time.Since(epoch))
}
