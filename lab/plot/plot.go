// Package plot draws the latency plots of wqlab: one empirical cumulative
// distribution (CDF) per configuration, latency on a logarithmic x axis in
// microseconds, the fraction of samples at or below it on the y axis.
//
// It is a thin layer over gonum.org/v1/plot. The output format follows the
// file name's extension: .svg (vector, the default of wqlab), .png, .pdf
// or .eps.
package plot

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// MinUs is the smallest x value drawn, in microseconds: samples below it
// (a log axis cannot show 0) are drawn at MinUs.
const MinUs = 0.01

// Errors returned by this package; test with errors.Is.
var (
	// ErrNoData is returned when no series has at least two points.
	ErrNoData = errors.New("plot: no data to draw")
	// ErrBadSeries is returned for a series whose Xs and Ys differ in
	// length, or hold NaN or infinite values.
	ErrBadSeries = errors.New("plot: bad series")
	// ErrFormat is returned for a file name whose extension is not .svg,
	// .png, .pdf or .eps.
	ErrFormat = errors.New("plot: unsupported file format")
)

// Series is one line of a CDF plot.
type Series struct {
	// Name is shown in the legend.
	Name string
	// XsUs are latencies in microseconds, non-decreasing; YS the fraction
	// of samples at or below each (0..1). Both have the same length.
	XsUs, Ys []float64
	// Dashed draws the line dashed (wqlab uses it for the Go baselines).
	Dashed bool
}

// CDF describes one plot.
type CDF struct {
	Title  string // plot title
	XLabel string // x axis label; "" means "queue->start latency (us, log scale)"
	Series []Series
	// Width and Height of the image in inches, legend included; 0 means
	// 12 x 6.
	Width, Height float64
}

// Write draws the plot to path, in the format its extension names. Series
// with fewer than two points are left out. It returns ErrNoData when none
// is left, ErrBadSeries for a malformed series, ErrFormat for an unknown
// extension, or the error of writing the file. It blocks while it renders
// and writes (tens of ms).
func (c CDF) Write(path string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	switch format {
	case "svg", "png", "pdf", "eps":
	default:
		return fmt.Errorf("%w: %q (want .svg, .png, .pdf or .eps)", ErrFormat, path)
	}
	var buf bytes.Buffer
	if err := c.Render(&buf, format); err != nil {
		return fmt.Errorf("plot: rendering %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plot: writing %s: %w", path, err)
	}
	return nil
}

// Render draws the plot to w in format ("svg", "png", "pdf" or "eps"),
// as Write does to a file; the HTML report inlines the SVG. It returns
// ErrNoData, ErrBadSeries or ErrFormat as Write does, or w's error. It
// blocks while it renders (tens of ms).
func (c CDF) Render(w io.Writer, format string) (err error) {
	switch format {
	case "svg", "png", "pdf", "eps":
	default:
		return fmt.Errorf("%w: %q (want svg, png, pdf or eps)", ErrFormat, format)
	}
	p, err := c.build()
	if err != nil {
		return err
	}
	wd, ht := c.Width, c.Height
	if wd <= 0 {
		wd = 12
	}
	if ht <= 0 {
		ht = 6
	}
	// gonum/plot panics on some degenerate inputs; never let that escape.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: rendering: %v", r)
		}
	}()
	W, H := vg.Length(wd)*vg.Inch, vg.Length(ht)*vg.Inch
	cw, err := draw.NewFormattedCanvas(W, H, format)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, err)
	}
	// The legend goes to the right of the plot, never over the lines.
	dc := draw.New(cw)
	legW := p.leg.Rectangle(dc).Size().X + vg.Points(12)
	p.plot.Draw(draw.Crop(dc, 0, -legW, 0, -vg.Points(6)))
	p.leg.Draw(draw.Crop(dc, W-legW, 0, 0, -vg.Points(24)))
	_, err = cw.WriteTo(w)
	return err
}

type built struct {
	plot *gplot.Plot
	leg  gplot.Legend
}

func (c CDF) build() (*built, error) {
	p := gplot.New()
	leg := gplot.NewLegend()
	leg.Top, leg.Left = true, true
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	if p.X.Label.Text == "" {
		p.X.Label.Text = "queue->start latency (us, log scale)"
	}
	p.Y.Label.Text = "fraction of samples"
	p.X.Scale = gplot.LogScale{}
	p.X.Tick.Marker = gplot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	xmin, xmax := math.Inf(1), math.Inf(-1)
	drawn := 0
	for i, s := range c.Series {
		if len(s.XsUs) != len(s.Ys) {
			return nil, fmt.Errorf("%w: %q has %d x and %d y values", ErrBadSeries, s.Name, len(s.XsUs), len(s.Ys))
		}
		if len(s.XsUs) < 2 {
			continue
		}
		xys := make(plotter.XYs, len(s.XsUs))
		for j := range s.XsUs {
			x, y := s.XsUs[j], s.Ys[j]
			if math.IsNaN(x) || math.IsInf(x, 0) || math.IsNaN(y) || math.IsInf(y, 0) {
				return nil, fmt.Errorf("%w: %q has a NaN or infinite value", ErrBadSeries, s.Name)
			}
			x = max(x, MinUs)
			xys[j] = plotter.XY{X: x, Y: y}
			xmin, xmax = min(xmin, x), max(xmax, x)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadSeries, s.Name, err)
		}
		l.Color = seriesColor(i)
		l.Width = vg.Points(1.5)
		if s.Dashed {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l)
		leg.Add(s.Name, l)
		drawn++
	}
	if drawn == 0 {
		return nil, ErrNoData
	}
	// A log axis needs a positive range of at least one decade to get
	// labelled ticks.
	lo := math.Pow10(int(math.Floor(math.Log10(xmin))))
	hi := math.Pow10(int(math.Ceil(math.Log10(xmax))))
	if hi <= lo {
		hi = lo * 10
	}
	p.X.Min, p.X.Max = lo, hi
	return &built{plot: p, leg: leg}, nil
}

// palette has twelve distinct colours (Tableau 10 plus two), so that a
// table's rows do not share one.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 255}, {0xff, 0x7f, 0x0e, 255}, {0x2c, 0xa0, 0x2c, 255}, {0xd6, 0x27, 0x28, 255},
	{0x94, 0x67, 0xbd, 255}, {0x8c, 0x56, 0x4b, 255}, {0xe3, 0x77, 0xc2, 255}, {0x7f, 0x7f, 0x7f, 255},
	{0xbc, 0xbd, 0x22, 255}, {0x17, 0xbe, 0xcf, 255}, {0x00, 0x00, 0x00, 255}, {0x39, 0x3b, 0x79, 255},
}

func seriesColor(i int) color.Color { return palette[i%len(palette)] }
