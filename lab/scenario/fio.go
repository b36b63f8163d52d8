package scenario

import (
	"fmt"
	"io"

	"github.com/gowq/wq/lab/stats"
)

// WriteFio writes, for the verity scenario, what fio would print for
// each measured row: the completion latency with its percentiles
// (stats.WriteFioClat) and the bandwidth, like seed 000's Before/After.
// ids selects the rows (none: every measured row). It returns
// stats.ErrNoSamples when the raw samples are not available (a result
// read back from JSON, or another scenario), or the writer's error.
func (s *ScenarioResult) WriteFio(w io.Writer, ids ...string) error {
	if len(s.clat) == 0 {
		return fmt.Errorf("scenario %s: fio output needs the raw verity samples of this run: %w", s.Name, stats.ErrNoSamples)
	}
	if len(ids) == 0 {
		for _, r := range s.Rows {
			ids = append(ids, r.ID)
		}
	}
	for _, id := range ids {
		r, smp := s.Row(id), s.clat[id]
		if r == nil || smp == nil || r.Skipped {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: (jobs=1, %d reads, %s)\n", r.title(), r.Items, fmtDur(r.MeasuredNs)); err != nil {
			return err
		}
		if err := stats.WriteFioClat(w, smp); err != nil {
			return err
		}
		mb := float64(smp.Len()) * 4096 / (1 << 20)
		if _, err := fmt.Fprintf(w, "   READ: bw=%.0fMiB/s (%.0fMB/s), io=%.1fMiB, run=%d-%dmsec\n\n",
			r.BandwidthMiBs, r.BandwidthMiBs*1.048576, mb, r.MeasuredNs/1e6, r.MeasuredNs/1e6); err != nil {
			return err
		}
	}
	return nil
}
