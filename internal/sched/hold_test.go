package sched

import (
	"runtime"
	"testing"
	"time"
)

// TestHoldTokenAndTimeout: Hold consumes a token that is already there,
// returns false when its time runs out (leaving the Parker idle, so that
// a following Park sleeps until the next Unpark), and true when an
// Unpark comes within it. Fault caught: a hold that loses a token, or
// leaves the futex word in the sleeping state after a timeout (the next
// Unpark would then not be a token).
func TestHoldTokenAndTimeout(t *testing.T) {
	var p Parker
	p.Unpark()
	if !p.Hold(int64(time.Minute)) {
		t.Fatal("Hold with a token pending returned false")
	}
	if p.Hold(0) {
		t.Fatal("Hold(0) with no token returned true")
	}
	if p.Hold(int64(time.Millisecond)) {
		t.Fatal("Hold returned true with no Unpark")
	}
	if p.Sleeping() {
		t.Fatal("Hold left the Parker sleeping after its timeout")
	}
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- p.Hold(int64(time.Minute))
	}()
	waitSleeping(t, &p)
	p.Unpark()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Hold woken by Unpark returned false")
		}
	case <-time.After(time.Minute):
		t.Fatal("Hold did not return after Unpark")
	}
}

// TestHoldDoesNotBlockStopTheWorld: a goroutine in a long Hold does not
// hold up a stop-the-world (runtime.GC stops the world twice): the GC
// returns while the Hold is still asleep. Fault caught: a hold with no
// safe point after the preemption signal's EINTR (or a futex_wait the
// kernel restarts), which would make every stop-the-world wait for the
// hold's end.
func TestHoldDoesNotBlockStopTheWorld(t *testing.T) {
	var p Parker
	done := make(chan bool, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- p.Hold(int64(10 * time.Minute))
	}()
	waitSleeping(t, &p)
	gcDone := make(chan struct{})
	go func() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms) // a third stop-the-world
		close(gcDone)
	}()
	select {
	case <-gcDone:
	case <-done:
		t.Fatal("Hold returned with no Unpark while the GC ran")
	case <-time.After(5 * time.Minute):
		t.Fatal("the stop-the-world waited for the Hold")
	}
	if !p.Sleeping() {
		t.Fatal("the Hold is no longer asleep after the GC")
	}
	p.Unpark()
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Hold woken by Unpark returned false")
		}
	case <-time.After(time.Minute):
		t.Fatal("Hold did not return after Unpark")
	}
}

func waitSleeping(t *testing.T, p *Parker) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !p.Sleeping() {
		if time.Now().After(deadline) {
			t.Fatal("the parker never went to sleep")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
