package sched

import (
	"testing"
	"time"
)

// ParkWait returns at once with a pending token (slept false), and after
// a real sleep reports it slept with a wait that is not negative and not
// absurd (under the 10 s the test allows). Catches a counter stamp that
// breaks the park or converts with a wrong rate sign.
func TestParkWaitMeasures(t *testing.T) {
	var p Parker
	p.Unpark()
	if _, slept := p.ParkWait(false); slept {
		t.Fatal("ParkWait with a token pending reported a sleep")
	}
	// Twice: the first calls may run before the counter is calibrated.
	for i := 0; i < 2; i++ {
		if i == 1 {
			time.Sleep(2 * tscCalibrateNs)
			tscUsable()
		}
		done := make(chan struct {
			ns    int64
			slept bool
		})
		GoLocked(func() {
			ns, slept := p.ParkWait(false)
			done <- struct {
				ns    int64
				slept bool
			}{ns, slept}
		})
		for !p.Sleeping() {
			time.Sleep(time.Millisecond)
		}
		p.Unpark()
		r := <-done
		if !r.slept || r.ns < 0 || r.ns > int64(10*time.Second) {
			t.Fatalf("round %d: ParkWait = %d ns, slept %v", i, r.ns, r.slept)
		}
	}
}
