package scenario

import (
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"

	"github.com/gowq/wq/lab/plot"
)

// figure is a plot of one scenario: a tail plot or a bar chart.
type figure interface {
	Write(path string) error
	Render(w io.Writer, format string) error
}

// WritePlot draws the scenario's plot to path (.svg, .png, .pdf or
// .eps): the figure its verdict rests on (see PlotCaption). It returns
// plot.ErrNoData when no row was measured, or the error of rendering or
// writing the file.
func (s *ScenarioResult) WritePlot(path string) error {
	return s.figure().Write(path)
}

// configColor returns the colour of configuration id in every plot: the
// palette's colour of its place in Configs(), so that one configuration
// has one colour across the report. Kernel rows share grey.
func configColor(id string) color.Color {
	for i, c := range allConfigs {
		if c.ID == id {
			return plot.Palette(i)
		}
	}
	return color.RGBA{0x99, 0x99, 0x99, 255}
}

// plotMetric names what the scenario's plot shows.
func (s *ScenarioResult) plotMetric() string {
	switch s.Name {
	case Verity:
		return "clat (completion latency)"
	case Throughput:
		return "back-to-back items/s"
	}
	return "queue->start latency"
}

func (s *ScenarioResult) plotTitle() string {
	t := fmt.Sprintf("wqlab %s: %s", s.Name, s.plotMetric())
	if s.Name == Throughput {
		t += ", one bar per row (black line above it: min-max across rounds)"
	} else {
		t += " tail (1 - CDF)"
	}
	if len(s.Seeds) > 0 {
		t += ", seed " + strings.Join(s.Seeds, ", ")
	}
	if s.Load.Antagonist != "" {
		t += "; load: " + s.Load.Antagonist
	}
	return t
}

// PlotCaption says what the scenario's plot shows and how the verdict's
// metric is read from it.
func (s *ScenarioResult) PlotCaption() string {
	switch s.Name {
	case Throughput:
		return "Items/s of the back-to-back phase, the throughput verdict's metric, per row (log axis); " +
			"the black line just above a bar is its range across the interleaving rounds."
	case Verity:
		return "Tail of verity's clat, the verdict's metric (avg clat): for each latency on the x axis, the fraction of reads " +
			"that took longer, on a log axis labelled by percentile (p90 at 0.1, p99 at 0.01). Lower and further left is better; " +
			"Go baselines dashed. The verdict compares averages, which the tail bounds but does not show."
	}
	read := ""
	switch s.Verdict.Metric {
	case mP98.name + " (us)":
		read = " The verdict's p98 is where a line crosses 0.02."
	case mP99.name + " (us)":
		read = " The verdict's p99 is where a line crosses 0.01 (p99)."
	default:
		read = " The verdict compares averages, which the tail bounds but does not show."
	}
	return "Tail of queue->start latency: for each latency on the x axis, the fraction of items that started later, on a log " +
		"axis labelled by percentile (p90 at 0.1, p99 at 0.01). Lower and further left is better; Go baselines dashed." + read
}

// figure is the plot WritePlot draws and the HTML report inlines.
func (s *ScenarioResult) figure() figure {
	if s.Name == Throughput {
		b := plot.Bars{Title: s.plotTitle(), XLabel: "empty items/s (log scale)", Log: true}
		for i := range s.Rows {
			r := &s.Rows[i]
			if r.Skipped || r.Throughput == nil {
				continue
			}
			bar := plot.Bar{Name: r.title(), Value: r.Throughput.ItemsPerSec, Color: configColor(r.ID)}
			if rs := r.Throughput.RoundsPerSec; len(rs) > 1 {
				bar.Lo, bar.Hi = slices.Min(rs), slices.Max(rs)
			}
			b.Bars = append(b.Bars, bar)
		}
		return b
	}
	c := plot.CDF{Title: s.plotTitle(), Tail: true}
	if s.Name == Verity {
		c.XLabel = "clat: read + verify round trip (us, log scale)"
	}
	for i := range s.Rows {
		r := &s.Rows[i]
		pts := r.CDF
		if s.Name == Verity {
			pts = r.ClatCDF
		}
		if r.Skipped || len(pts) < 2 {
			continue
		}
		ser := plot.Series{Name: r.title(), Dashed: r.Kind == KindBaseline, Color: configColor(r.ID)}
		for _, p := range pts {
			ser.XsUs = append(ser.XsUs, p.Us)
			ser.Ys = append(ser.Ys, p.Frac)
		}
		c.Series = append(c.Series, ser)
	}
	return c
}
