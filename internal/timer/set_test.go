package timer

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestOnRefusedByTheGate: near a thread limit On starts no thread and
// returns nil (the caller arms a Go timer), and the next On, once the gate
// allows, starts the base. Catches a base started past the gate, whose
// thread creation aborts the process.
func TestOnRefusedByTheGate(t *testing.T) {
	refuse := refuseThreads(t)
	s := AcquireRT(3)
	defer s.Release()
	refuse.Store(true)
	if b := s.On(0); b != nil {
		t.Fatal("On started a base while the thread gate refuses")
	}
	if s.Refused() != 1 || len(s.Bases()) != 0 {
		t.Errorf("refused %d, bases %d; want 1 and 0", s.Refused(), len(s.Bases()))
	}
	// A nil base is a Go timer.
	var fired atomic.Bool
	var tm Timer
	tm.Init(func() { fired.Store(true) })
	tm.Reset(time.Millisecond, s.On(0))
	deadline := time.Now().Add(10 * time.Second)
	for !fired.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the Go timer armed instead of a refused base did not fire")
		}
		time.Sleep(time.Millisecond)
	}
	refuse.Store(false)
	if b := s.On(0); b == nil {
		t.Fatal("On after the gate allows again = nil")
	}
}
