package stats

import (
	"bufio"
	"fmt"
	"io"
	"math"
)

// fioPercentiles is fio's default clat percentile list, in the order fio
// prints it.
var fioPercentiles = []float64{1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99}

// WriteFioClat writes s the way fio prints completion latency, always in
// microseconds:
//
//	clat (usec): min=13, max=23882, avg=29.56, stdev=113.29
//	clat percentiles (usec):
//	 |  1.00th=[   14],  5.00th=[   15], 10.00th=[   16], 20.00th=[   17],
//	 ...
//	 | 99.99th=[ 4015]
//
// It follows fio's stat.c: min and max are truncated to whole us, avg and
// stdev (n-1) are printed "%5.02f"; each percentile is the nearest-rank
// sample (the smallest sample with at least p% of the samples at or below
// it) rounded up to whole us, printed "%5.2fth=[%*d]" with a field width of
// max(5, digits of the largest value) and (80-7)/(12+width) values to a
// line (four at widths 5 and 6).
// Unlike fio it never switches to nsec or msec, so runs compare
// line by line.
//
// It returns ErrNoSamples (writing nothing) when s is empty,
// ErrBadArgument for a nil writer, or the writer's error.
func WriteFioClat(w io.Writer, s *Samples) error {
	if w == nil || s == nil {
		return fmt.Errorf("%w: nil writer or samples", ErrBadArgument)
	}
	if s.n == 0 {
		return ErrNoSamples
	}
	sum := s.Summary()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "    clat (usec): min=%d, max=%d, avg=%5.02f, stdev=%5.02f\n",
		s.minNs/1000, s.maxNs/1000, sum.Avg, sum.Stdev)

	vals := make([]int64, len(fioPercentiles))
	var maxv int64
	for i, p := range fioPercentiles {
		ns := s.nearestRankNs(p)
		vals[i] = (ns + 999) / 1000 // fio: (v + 999) / 1000
		maxv = max(maxv, vals[i])
	}
	const precision = 2
	width := 5
	if maxv > 0 {
		width = max(5, int(math.Log10(float64(maxv)))+1)
	}
	perLine := (80 - 7) / (precision + 10 + width)
	fmt.Fprint(bw, "    clat percentiles (usec):\n     |")
	for j, p := range fioPercentiles {
		if j != 0 && j%perLine == 0 {
			fmt.Fprint(bw, "     |")
		}
		last := j == len(fioPercentiles)-1
		sep := ','
		if last {
			sep = '\n'
		}
		fmt.Fprintf(bw, " %5.2fth=[%*d]%c", p, width, vals[j], sep)
		if !last && j%perLine == perLine-1 {
			fmt.Fprint(bw, "\n")
		}
	}
	return bw.Flush()
}
