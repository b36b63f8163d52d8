package timer

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// refuseThreads makes the thread gate refuse every creation while the
// returned flag is set.
func refuseThreads(t *testing.T) *atomic.Bool {
	var refuse atomic.Bool
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/test", Max: 10, Current: 10}
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		if refuse.Load() {
			return 0, lim, nil
		}
		return 1 << 20, sched.ThreadLimit{}, nil
	})
	t.Cleanup(restore)
	return &refuse
}

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
