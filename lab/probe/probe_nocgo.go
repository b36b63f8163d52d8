//go:build !cgo

package probe

import (
	"fmt"
	"time"
)

// Available reports whether the probe can run in this build: ErrUnavailable,
// because the probe is C code and this build has no cgo.
func Available() error { return ErrUnavailable }

// Run checks opts like the cgo build does, then returns ErrUnavailable: a
// build without cgo has no probe threads. It never blocks.
func Run(opts Options) ([]int64, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return nil, ErrUnavailable
}

// PingPong checks n like the cgo build does, then returns ErrUnavailable:
// a build without cgo has no C threads to ping-pong. It never blocks.
func PingPong(n, driverCPU, partnerCPU int) (elapsed time.Duration, callNs []int64, err error) {
	if n < 1 {
		return 0, nil, fmt.Errorf("probe: ping-pong rounds must be > 0, got %d", n)
	}
	return 0, nil, ErrUnavailable
}
