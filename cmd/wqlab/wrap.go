package main

import "strings"

// wrapText breaks s at spaces into lines of at most width columns (a word
// longer than width gets a line of its own), so that --help reads in an
// 80-column terminal.
func wrapText(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
