package main

import (
	"strings"
	"testing"

	"github.com/gowq/wq/lab/scenario"
)

// TestListNamesBlockingAndSeeds: --list and --help name the blocking
// scenario the README uses, and say what a seed is and which scenario
// reproduces each (catches a listing that omits blocking or uses "seed"
// unexplained).
func TestListNamesBlockingAndSeeds(t *testing.T) {
	code, out, errOut := run(t, "--list")
	if code != exitOK {
		t.Fatalf("--list: exit %d: %s", code, errOut)
	}
	for _, want := range []string{"\nblocking ", scenario.SeedsExplained, "seed 004 -> delayed", "seed 002 -> submit"} {
		if !strings.Contains(out, want) {
			t.Errorf("--list lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run(t, "--help")
	if code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	for _, want := range []string{"or blocking alone", `A "seed" is`} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
