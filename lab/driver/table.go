package driver

import (
	"fmt"
	"strings"
)

// Line is one row of a box table: its cells (the first is the row's
// label, printed left-aligned; the others right-aligned), or, when
// Skipped, the label and "skipped: <Skip>" across the other columns.
type Line struct {
	Cells   []string
	Skipped bool
	Skip    string // the reason, when Skipped
}

// WriteBox appends to b a box table in the seeds' style:
//
//	+--------+-----+
//	| config |   n |
//	+--------+-----+
//	| a      |  12 |
//	+--------+-----+
//
// heads are the column headings; a Line with fewer cells than heads is
// padded with empty cells. A skip reason longer than the table is cut
// with "...". WriteBox does not fail.
func WriteBox(b *strings.Builder, heads []string, lines []Line) {
	widths := make([]int, len(heads))
	for i, h := range heads {
		widths[i] = len(h)
	}
	cell := func(l Line, i int) string {
		if i < len(l.Cells) {
			return l.Cells[i]
		}
		return ""
	}
	for _, l := range lines {
		if len(widths) > 0 {
			widths[0] = max(widths[0], len(cell(l, 0)))
		}
		if l.Skipped {
			continue
		}
		for i := 1; i < len(widths); i++ {
			widths[i] = max(widths[i], len(cell(l, i)))
		}
	}
	sep := func() {
		b.WriteByte('+')
		for _, wd := range widths {
			b.WriteString(strings.Repeat("-", wd+2))
			b.WriteByte('+')
		}
		b.WriteByte('\n')
	}
	inner := -3 // width of all columns but the first, as one cell
	for _, wd := range widths[min(1, len(widths)):] {
		inner += wd + 3
	}
	sep()
	for i, h := range heads {
		if i == 0 {
			fmt.Fprintf(b, "| %-*s |", widths[i], h)
		} else {
			fmt.Fprintf(b, " %*s |", widths[i], h)
		}
	}
	b.WriteByte('\n')
	sep()
	for _, l := range lines {
		fmt.Fprintf(b, "| %-*s |", widths[0], cell(l, 0))
		if l.Skipped {
			msg := "skipped: " + l.Skip
			if len(msg) > inner && inner > 3 {
				msg = msg[:inner-3] + "..."
			}
			fmt.Fprintf(b, " %-*s |\n", max(inner, 0), msg)
			continue
		}
		for i := 1; i < len(widths); i++ {
			fmt.Fprintf(b, " %*s |", widths[i], cell(l, i))
		}
		b.WriteByte('\n')
	}
	sep()
}
