package plot

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func series() []Series {
	return []Series{
		{Name: "RT per-CPU", XsUs: []float64{0, 1.5, 3, 40}, Ys: []float64{0, 0.5, 0.9, 1}},
		{Name: "go", XsUs: []float64{2, 30, 900, 30000}, Ys: []float64{0, 0.5, 0.99, 1}, Dashed: true},
		{Name: "empty"},
	}
}

func TestWriteSVGAndPNG(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"cdf.svg", "cdf.png"} {
		path := filepath.Join(dir, name)
		if err := (CDF{Title: "test", Series: series()}).Write(path); err != nil {
			t.Fatalf("Write(%s): %v", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 1000 {
			t.Fatalf("%s: only %d bytes", name, len(b))
		}
		if name == "cdf.svg" {
			s := string(b)
			for _, want := range []string{"<svg", "RT per-CPU", "go", "log scale"} {
				if !strings.Contains(s, want) {
					t.Errorf("svg lacks %q", want)
				}
			}
		}
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		c    CDF
		file string
		want error
	}{
		{"no data", CDF{Series: []Series{{Name: "x", XsUs: []float64{1}, Ys: []float64{1}}}}, "a.svg", ErrNoData},
		{"length", CDF{Series: []Series{{Name: "x", XsUs: []float64{1, 2}, Ys: []float64{1}}}}, "a.svg", ErrBadSeries},
		{"nan", CDF{Series: []Series{{Name: "x", XsUs: []float64{1, math.NaN()}, Ys: []float64{0, 1}}}}, "a.svg", ErrBadSeries},
		{"format", CDF{Series: series()}, "a.txt", ErrFormat},
	}
	for _, tc := range cases {
		err := tc.c.Write(filepath.Join(dir, tc.file))
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	// A directory that does not exist gives an error, not a panic.
	if err := (CDF{Series: series()}).Write(filepath.Join(dir, "no", "such", "a.svg")); err == nil {
		t.Error("write into missing directory: no error")
	}
}

func TestSingleValueSeries(t *testing.T) {
	// All samples equal: the x range is a single point; the axis must
	// still get a positive decade.
	c := CDF{Series: []Series{{Name: "flat", XsUs: []float64{5, 5}, Ys: []float64{0, 1}}}}
	if err := c.Write(filepath.Join(t.TempDir(), "flat.svg")); err != nil {
		t.Fatal(err)
	}
}

// TestTailPlotLabelsNines: a tail plot's y axis is labelled by
// percentile (catches a linear CDF axis that squeezes the tail).
func TestTailPlotLabelsNines(t *testing.T) {
	var b strings.Builder
	if err := (CDF{Title: "t", Tail: true, Series: series()}).Render(&b, "svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"p90", "p99", "p99.9", "1 - CDF (log)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tail plot lacks %q", want)
		}
	}
}

// TestBars draws a bar chart and refuses bad values.
func TestBars(t *testing.T) {
	var b strings.Builder
	bars := Bars{Title: "items/s", XLabel: "items/s", Log: true, Bars: []Bar{
		{Name: "normal per-CPU", Value: 4e5, Lo: 3e5, Hi: 5e5}, {Name: "ants/v2", Value: 9e5}}}
	if err := bars.Render(&b, "svg"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "ants/v2") {
		t.Error("bar label missing")
	}
	bars.Bars[0].Value = math.NaN()
	if err := bars.Render(&b, "svg"); !errors.Is(err, ErrBadSeries) {
		t.Errorf("NaN bar: %v", err)
	}
	if err := (Bars{}).Render(&b, "svg"); !errors.Is(err, ErrNoData) {
		t.Errorf("no bars: %v", err)
	}
}
