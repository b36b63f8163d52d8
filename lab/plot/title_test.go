package plot

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// longTitle is as long as wqlab's longest plot titles (erofs under load).
const longTitle = "wqlab erofs: queue->start latency tail (1 - CDF), seed erofs-z_erofs_decompressqueue, verity-read; load: 2 hogs pinned to cpu0 at nice 19, fio randread 4k"

var svgTextX = regexp.MustCompile(`<text x="(-?[0-9.e+-]+)"`)

// checkTextInside fails when some text of svg starts left of the image.
func checkTextInside(t *testing.T, what, svg string) {
	t.Helper()
	ms := svgTextX.FindAllStringSubmatch(svg, -1)
	if len(ms) == 0 {
		t.Fatalf("%s: no <text x=...> in the SVG", what)
	}
	for _, m := range ms {
		if x, err := strconv.ParseFloat(m[1], 64); err != nil || x < 0 {
			t.Errorf("%s: text starts at x=%s, left of the image (clipped)", what, m[1])
		}
	}
	for _, w := range []string{"wqlab", "erofs:", "fio", "randread"} {
		if !strings.Contains(svg, w) {
			t.Errorf("%s: title word %q missing", what, w)
		}
	}
}

// A plot title wider than the image is wrapped, not centred past the left
// edge. Catches: the erofs title clipped on the left (<text x="-21.4">).
func TestLongPlotTitleFits(t *testing.T) {
	var b strings.Builder
	if err := (CDF{Title: longTitle, Series: series(), Tail: true}).Render(&b, "svg"); err != nil {
		t.Fatal(err)
	}
	checkTextInside(t, "CDF", b.String())
	b.Reset()
	bars := Bars{Title: longTitle, XLabel: "items/s", Log: true, Bars: []Bar{{Name: "normal per-CPU", Value: 4e5}, {Name: "go", Value: 9e5}}}
	if err := bars.Render(&b, "svg"); err != nil {
		t.Fatal(err)
	}
	checkTextInside(t, "Bars", b.String())
}
