package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/gowq/wq/lab/scenario"
)

func cmpOr(a, b string) string { return cmp.Or(a, b) }

// listSeeds prints what a seed is and which scenario reproduces each.
func listSeeds(w io.Writer) {
	fmt.Fprintf(w, "\n%s\n", scenario.SeedsExplained)
	for _, s := range scenario.Seeds() {
		fmt.Fprintf(w, "  seed %s -> %s: %s\n           (%s)\n", s.ID, strings.Join(s.Scenarios, ", "), s.Adds, s.Source)
	}
}
