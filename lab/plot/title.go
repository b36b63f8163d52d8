package plot

import (
	"strings"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
)

// titleMargin is kept free on each side of a wrapped title: a browser's
// font may set it a little wider than gonum measured it.
const titleMargin = 24

// fitTitle wraps title at spaces so that no line is wider than width in
// style; gonum centres a title over the plot and would start a longer one
// left of the image, clipping it. A single word wider than width stays on
// its own line.
func fitTitle(style text.Style, title string, width vg.Length) string {
	width -= 2 * vg.Points(titleMargin)
	if title == "" || strings.Contains(title, "\n") || style.Width(title) <= width {
		return title
	}
	var lines []string
	line := ""
	for _, w := range strings.Fields(title) {
		next := w
		if line != "" {
			next = line + " " + w
		}
		if line != "" && style.Width(next) > width {
			lines = append(lines, line)
			next = w
		}
		line = next
	}
	lines = append(lines, line)
	return strings.Join(lines, "\n")
}
