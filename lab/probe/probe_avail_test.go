package probe

import (
	"errors"
	"testing"
)

// TestAvailableMatchesRun catches Available and Run disagreeing on whether
// this build has the probe (the lab skips the raw-probe rows on Available).
func TestAvailableMatchesRun(t *testing.T) {
	_, err := Run(Options{N: 1, Policy: Other, WaiterCPU: -1, WakerCPU: -1})
	if got, want := errors.Is(err, ErrUnavailable), Available() != nil; got != want {
		t.Fatalf("Run error %v, Available() %v: they disagree", err, Available())
	}
}
