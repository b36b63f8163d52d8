//go:build !cgo

package probe

import (
	"errors"
	"testing"
)

// TestNoCgoPingPongUnavailable catches a build without cgo whose
// ping-pong pretends to have run, or accepts a round count the cgo build
// refuses.
func TestNoCgoPingPongUnavailable(t *testing.T) {
	if d, lat, err := PingPong(10, -1, -1); !errors.Is(err, ErrUnavailable) || d != 0 || lat != nil {
		t.Fatalf("PingPong = %v, %v, %v; want ErrUnavailable", d, lat, err)
	}
	if _, _, err := PingPong(0, -1, -1); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("PingPong(0) = %v, want the invalid-count error", err)
	}
}
