//go:build !cgo

package probe

import (
	"fmt"
	"time"
)

// PingPong checks n like the cgo build does, then returns ErrUnavailable:
// a build without cgo has no C threads to ping-pong. It never blocks.
func PingPong(n, driverCPU, partnerCPU int) (elapsed time.Duration, callNs []int64, err error) {
	if n < 1 {
		return 0, nil, fmt.Errorf("probe: ping-pong rounds must be > 0, got %d", n)
	}
	return 0, nil, ErrUnavailable
}
