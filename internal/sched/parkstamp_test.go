package sched

import (
	"runtime"
	"testing"
)

// TestParkStamp: a ParkStamp woken by Unpark writes a stamp between the
// Unpark and its own return, on the Nanotime clock; one that finds a
// token pending returns at once and leaves the stamp alone.
func TestParkStamp(t *testing.T) {
	var p Parker
	for i := 0; i < 20; i++ {
		var woken, after int64
		parked := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			close(parked)
			p.ParkStamp(&woken)
			after = Nanotime()
		}()
		<-parked
		for !p.Sleeping() {
			runtime.Gosched()
		}
		before := Nanotime()
		if !p.Unpark() {
			t.Fatalf("Unpark of a sleeping parker issued no futex_wake")
		}
		<-done
		if woken < before || woken > after {
			t.Fatalf("round %d: stamp %d not between the Unpark (%d) and the return (%d)", i, woken, before, after)
		}
	}
	// A pending token: no wait, the stamp is untouched.
	p.Unpark()
	stamp := int64(-7)
	p.ParkStamp(&stamp)
	if stamp != -7 {
		t.Fatalf("ParkStamp with a token pending wrote %d", stamp)
	}
	if p.Sleeping() {
		t.Fatalf("token not consumed")
	}
}
