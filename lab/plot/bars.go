package plot

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Bar is one horizontal bar of a Bars plot.
type Bar struct {
	Name  string      // the bar's label on the y axis
	Value float64     // its length, in the unit of Bars.XLabel; >= 0
	Color color.Color // nil: the palette's colour of its position
	// Lo and Hi, when Hi > 0, draw a range over the bar (e.g. the
	// figure's min and max across rounds).
	Lo, Hi float64
}

// Bars is a horizontal bar chart: one figure per configuration (wqlab:
// items/s of the throughput table), on a log x axis when Log is set.
type Bars struct {
	Title  string
	XLabel string
	Bars   []Bar
	Log    bool
	// Width and Height in inches; 0 means 12 x (1 + 0.4 per bar).
	Width, Height float64
}

// Write draws the chart to path in the format of its extension, as
// CDF.Write does; errors as CDF.Write.
func (b Bars) Write(path string) error { return writeFile(path, b.Render) }

// Render draws the chart to w in format ("svg", "png", "pdf" or
// "eps"). It returns ErrNoData when no bar has a positive value,
// ErrBadSeries for a negative, NaN or infinite value, ErrFormat for an
// unknown format, or w's error. It blocks while it renders.
func (b Bars) Render(w io.Writer, format string) (err error) {
	switch format {
	case "svg", "png", "pdf", "eps":
	default:
		return fmt.Errorf("%w: %q (want svg, png, pdf or eps)", ErrFormat, format)
	}
	p := gplot.New()
	leg := gplot.NewLegend()
	legible(p, &leg)
	p.Title.Text = b.Title
	p.X.Label.Text = b.XLabel
	if b.Log {
		p.X.Scale = gplot.LogScale{}
		p.X.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	p.Add(plotter.NewGrid())
	var names []string
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, bar := range b.Bars {
		v := bar.Value
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: bar %q has value %v", ErrBadSeries, bar.Name, v)
		}
		names = append(names, bar.Name)
		if v > 0 {
			lo, hi = min(lo, v), max(hi, v)
		}
		if bar.Hi > 0 && bar.Lo > 0 {
			lo, hi = min(lo, bar.Lo), max(hi, bar.Hi)
		}
	}
	if len(names) == 0 || hi <= 0 || math.IsInf(hi, -1) {
		return ErrNoData
	}
	// The first bar on top, as the table lists the rows.
	slices.Reverse(names)
	p.NominalY(names...)
	at := func(i int) float64 { return float64(len(names) - 1 - i) }
	p.Y.Min, p.Y.Max = -0.6, float64(len(names))-0.4
	base := 0.0
	if b.Log {
		p.X.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.X.Max = math.Pow10(int(math.Ceil(math.Log10(hi))))
		if p.X.Max <= p.X.Min {
			p.X.Max = p.X.Min * 10
		}
		base = p.X.Min
	} else {
		p.X.Min = 0
	}
	// Bars are thick lines from the axis, so that a log axis (which has
	// no 0) can carry them too.
	for i, bar := range b.Bars {
		if bar.Value <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: base, Y: at(i)}, {X: bar.Value, Y: at(i)}})
		if err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadSeries, bar.Name, err)
		}
		l.Width = vg.Points(14)
		l.Color = seriesColor(i)
		if bar.Color != nil {
			l.Color = bar.Color
		}
		p.Add(l)
		if bar.Hi > 0 && bar.Lo > 0 {
			// Just above the bar, so that it shows on a bar of any colour.
			y := at(i) + 0.32
			rng, err := plotter.NewLine(plotter.XYs{{X: bar.Lo, Y: y}, {X: bar.Hi, Y: y}})
			if err == nil {
				rng.Width = vg.Points(2)
				rng.Color = color.Black
				p.Add(rng)
			}
		}
	}
	wd, ht := b.Width, b.Height
	if wd <= 0 {
		wd = 12
	}
	if ht <= 0 {
		ht = 1.2 + 0.4*float64(len(names))
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: rendering: %v", r)
		}
	}()
	cw, err := draw.NewFormattedCanvas(vg.Length(wd)*vg.Inch, vg.Length(ht)*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	// A margin on the left: a browser's font may set the row names wider
	// than gonum measured them.
	p.Title.Text = fitTitle(p.Title.TextStyle, p.Title.Text, vg.Length(wd)*vg.Inch-vg.Points(12))
	p.Draw(draw.Crop(draw.New(cw), vg.Points(12), 0, 0, 0))
	_, err = cw.WriteTo(w)
	return err
}
