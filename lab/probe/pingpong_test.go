//go:build cgo

package probe

import "testing"

// TestPingPong: every round trip completes and is timed. Fault caught: a
// lost wake-up (the run would hang) or calls left unrecorded.
func TestPingPong(t *testing.T) {
	elapsed, calls, err := PingPong(2000, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2000 || elapsed <= 0 {
		t.Fatalf("%d calls in %v, want 2000 in a positive time", len(calls), elapsed)
	}
	for i, c := range calls {
		if c <= 0 {
			t.Fatalf("call %d took %d ns, want > 0", i, c)
		}
	}
	t.Logf("%.0f round trips/s", 2000/elapsed.Seconds())
	if _, _, err := PingPong(0, -1, -1); err == nil {
		t.Error("0 rounds accepted")
	}
}
