// Package plot draws the plots of wqlab: latency distributions, one line
// per configuration, latency on a logarithmic x axis in microseconds and
// on the y axis the fraction of samples at or below it (CDF) or, for a
// tail plot, above it on a log scale (1 - CDF); and bar charts of one
// figure per configuration (Bars).
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
	// Color is the line's colour; nil means the palette's colour of the
	// series' position. Give every configuration the same colour in
	// every plot with Palette(i) of a fixed index.
	Color color.Color
}

// CDF describes one plot.
type CDF struct {
	Title  string // plot title
	XLabel string // x axis label; "" means "queue->start latency (us, log scale)"
	Series []Series
	// Width and Height of the image in inches, legend included; 0 means
	// 12 x 6.
	Width, Height float64
	// Tail draws the tail instead of the CDF: on the y axis the fraction
	// of samples above each latency (1 - CDF), on a log scale from 1 down
	// to TailMin, labelled with the percentile each decade is (p90, p99,
	// p99.9), as HdrHistogram's percentile plots do. The tail, where
	// p98 and p99 verdicts are read, then gets as much room as the body.
	Tail bool
}

// TailMin is the smallest fraction a tail plot shows (p99.99); the
// samples' maximum (fraction 0) is drawn there.
const TailMin = 1e-4

// Write draws the plot to path, in the format its extension names. Series
// with fewer than two points are left out. It returns ErrNoData when none
// is left, ErrBadSeries for a malformed series, ErrFormat for an unknown
// extension, or the error of writing the file. It blocks while it renders
// and writes (tens of ms).
func (c CDF) Write(path string) error { return writeFile(path, c.Render) }

// writeFile renders to path in the format its extension names, for Write
// of a CDF or of Bars: ErrFormat for an unknown extension, render's error,
// or the error of writing the file.
func writeFile(path string, render func(io.Writer, string) error) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	switch format {
	case "svg", "png", "pdf", "eps":
	default:
		return fmt.Errorf("%w: %q (want .svg, .png, .pdf or .eps)", ErrFormat, path)
	}
	var buf bytes.Buffer
	if err := render(&buf, format); err != nil {
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
	p.plot.Title.Text = fitTitle(p.plot.Title.TextStyle, p.plot.Title.Text, W-legW)
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
	if c.Tail {
		p.Y.Label.Text = "1 - CDF (log)"
		p.Y.Scale = gplot.LogScale{}
		p.Y.Tick.Marker = nineTicks{}
		p.Y.Min, p.Y.Max = TailMin, 1
	}
	legible(p, &leg)
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
			if c.Tail {
				y = max(1-y, TailMin)
			}
			xys[j] = plotter.XY{X: x, Y: y}
			xmin, xmax = min(xmin, x), max(xmax, x)
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", ErrBadSeries, s.Name, err)
		}
		l.Color = seriesColor(i)
		if s.Color != nil {
			l.Color = s.Color
		}
		l.Width = vg.Points(2)
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

// Palette returns colour i of the plots' palette (twelve distinct
// colours, then again from the first).
func Palette(i int) color.Color { return seriesColor(max(i, 0)) }

// legible sets the font sizes of the title, axes and legend so that they
// read at the page width of wqlab's report.
func legible(p *gplot.Plot, leg *gplot.Legend) {
	p.Title.TextStyle.Font.Size = vg.Points(15)
	for _, a := range []*gplot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(13)
		a.Tick.Label.Font.Size = vg.Points(12)
	}
	leg.TextStyle.Font.Size = vg.Points(13)
	leg.ThumbnailWidth = vg.Points(28)
	leg.Padding = vg.Points(3)
}

// nineTicks labels a log-scaled tail axis by the percentile each decade
// is: 1 is p0, 0.1 is p90, 0.01 is p99, 0.001 is p99.9.
type nineTicks struct{}

func (nineTicks) Ticks(lo, hi float64) []gplot.Tick {
	var out []gplot.Tick
	for e := 0; e >= -8; e-- {
		v := math.Pow10(e)
		if v < lo*0.999 || v > hi*1.001 {
			continue
		}
		label := "1 (p0)"
		if e < 0 {
			label = fmt.Sprintf("%g (p%s)", v, strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.*f", -e, 100*(1-v)), "0"), "."))
		}
		out = append(out, gplot.Tick{Value: v, Label: label})
		if e > -8 {
			for k := 2; k < 10; k++ {
				if m := v / 10 * float64(k); m >= lo && m <= hi {
					out = append(out, gplot.Tick{Value: m})
				}
			}
		}
	}
	return out
}
