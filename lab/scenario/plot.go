package scenario

import (
	"fmt"

	"github.com/gowq/wq/lab/plot"
)

// WritePlot draws the scenario's queue->start latency CDF, one line per
// measured row (Go baselines dashed), to path (.svg, .png, .pdf or .eps).
// It returns plot.ErrNoData when no row was measured, or the error of
// rendering or writing the file.
func (s *ScenarioResult) WritePlot(path string) error {
	return s.cdfPlot().Write(path)
}

// cdfPlot is the plot WritePlot draws and the HTML report inlines.
func (s *ScenarioResult) cdfPlot() plot.CDF {
	c := plot.CDF{Title: fmt.Sprintf("wqlab %s (seed %s): queue->start latency CDF", s.Name, joinSeeds(s.Seeds))}
	if s.Load.Antagonist != "" {
		c.Title += ", load: " + s.Load.Antagonist
	}
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.Skipped || len(r.CDF) < 2 {
			continue
		}
		ser := plot.Series{Name: r.title(), Dashed: r.Kind == KindBaseline}
		for _, p := range r.CDF {
			ser.XsUs = append(ser.XsUs, p.Us)
			ser.Ys = append(ser.Ys, p.Frac)
		}
		c.Series = append(c.Series, ser)
	}
	return c
}

func joinSeeds(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}
