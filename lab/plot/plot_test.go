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
