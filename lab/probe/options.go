package probe

import (
	"errors"
	"fmt"
	"time"
)

// Policy of the waiting thread. The values are Linux's SCHED_* numbers,
// which the cgo probe hands to sched_setscheduler unchanged.
type Policy int

const (
	Other Policy = 0 // SCHED_OTHER, nice 0
	FIFO  Policy = 1 // SCHED_FIFO
)

// Options shape a probe run.
type Options struct {
	N         int           // wake-ups to measure (> 0)
	Policy    Policy        // waiter's policy
	Priority  int           // RT priority for FIFO (1..99)
	WaiterCPU int           // CPU to pin the waiter to, -1 for none
	WakerCPU  int           // CPU to pin the waker to, -1 for none
	Gap       time.Duration // pause between wake-ups
}

// ErrUnavailable is returned by Run and Available in a build without cgo
// (CGO_ENABLED=0, or no C compiler): the probe's threads are C threads, so
// there is nothing to measure with.
var ErrUnavailable = errors.New("raw probe needs cgo (gcc), not in this build: its two threads are C threads with no Go scheduler in the path (CGO_ENABLED=1 and a C compiler build it)")

// validate checks opts; the same rules hold with and without cgo.
func (o Options) validate() error {
	if o.N <= 0 {
		return fmt.Errorf("probe: N must be > 0, got %d", o.N)
	}
	if o.Policy == FIFO && (o.Priority < 1 || o.Priority > 99) {
		return fmt.Errorf("probe: FIFO priority %d out of range 1..99", o.Priority)
	}
	return nil
}
