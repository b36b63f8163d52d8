//go:build !cgo

package probe

import (
	"errors"
	"testing"
)

// TestNoCgoReportsUnavailable catches a build without cgo that pretends the
// probe ran (or does not build at all: the package needs a !cgo file).
func TestNoCgoReportsUnavailable(t *testing.T) {
	if err := Available(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available() = %v, want ErrUnavailable", err)
	}
	lat, err := Run(Options{N: 10, Policy: Other, WaiterCPU: -1, WakerCPU: -1})
	if !errors.Is(err, ErrUnavailable) || lat != nil {
		t.Fatalf("Run = %v, %v; want nil, ErrUnavailable", lat, err)
	}
	if _, err := Run(Options{N: 0}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Run(N=0) = %v, want the invalid-options error", err)
	}
}
