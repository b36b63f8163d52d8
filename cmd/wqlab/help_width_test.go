package main

import (
	"strings"
	"testing"
)

// The prose of --help fits an 80-column terminal. Catches: the seed
// sentence printed as one 219-column line.
func TestHelpProseFits80Columns(t *testing.T) {
	code, out, _ := run(t, "--help")
	if code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	prose, _, _ := strings.Cut(out, "\nUsage:")
	for _, l := range strings.Split(prose, "\n") {
		if len(l) > 80 {
			t.Errorf("--help line of %d columns: %q", len(l), l)
		}
	}
	if !strings.Contains(out, `A "seed" is`) {
		t.Error(`--help lacks the seed sentence`)
	}
}
