package timer

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestRespawnWaitsForTheGate: a timer function that ends its thread
// (runtime.Goexit) while the gate refuses leaves the heap to a replacement
// started once the gate allows; a timer armed meanwhile fires then, late,
// not never. Catches a replacement started past the gate, or given up.
func TestRespawnWaitsForTheGate(t *testing.T) {
	refuse := refuseThreads(t)
	s := AcquireRT(4)
	defer s.Release()
	b := s.On(0)
	if b == nil {
		t.Fatal("On = nil with the gate open")
	}
	exited := make(chan struct{})
	var first Timer
	first.Init(func() {
		refuse.Store(true)
		close(exited)
		runtime.Goexit()
	})
	first.Reset(0, b)
	<-exited
	var fired atomic.Bool
	var second Timer
	second.Init(func() { fired.Store(true) })
	second.Reset(time.Millisecond, b)
	time.Sleep(50 * time.Millisecond)
	if fired.Load() {
		t.Fatal("a timer fired with no thread to run it")
	}
	refuse.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for !fired.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the timer did not fire once the gate allowed a replacement thread")
		}
		time.Sleep(time.Millisecond)
	}
}
