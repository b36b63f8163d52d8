package sched

import (
	"runtime"
	"testing"
)

func TestGoroutineState(t *testing.T) {
	id, locked, ok := GoroutineState()
	if !ok || id <= 0 || locked {
		t.Fatalf("GoroutineState() = %d, %v, %v; want an id, unlocked, ok", id, locked, ok)
	}
	type state struct {
		id           int64
		locked, ok   bool
		lockedOnce   bool
		unlockedOnce bool
	}
	ch := make(chan state)
	go func() {
		var s state
		s.id, _, s.ok = GoroutineState()
		runtime.LockOSThread()
		runtime.LockOSThread()
		_, s.lockedOnce, _ = GoroutineState()
		runtime.UnlockOSThread()
		_, s.locked, _ = GoroutineState() // still locked once
		runtime.UnlockOSThread()
		_, s.unlockedOnce, _ = GoroutineState()
		ch <- s
	}()
	s := <-ch
	if !s.ok || s.id == id || s.id <= 0 {
		t.Errorf("other goroutine's id %d (ok %v), this one's %d: want a different id", s.id, s.ok, id)
	}
	if !s.lockedOnce || !s.locked || s.unlockedOnce {
		t.Errorf("locked twice: %v, once: %v, not at all: %v; want true, true, false", s.lockedOnce, s.locked, s.unlockedOnce)
	}
}

func TestParseHeader(t *testing.T) {
	for _, c := range []struct {
		in         string
		id         int64
		locked, ok bool
	}{
		{"goroutine 7 [running]:\nmain.f()", 7, false, true},
		{"goroutine 123456 [running, locked to thread]:\n", 123456, true, true},
		{"goroutine 9 [running, synctest bubble 3]:", 9, false, true},
		{"goroutine 9 [running, locked to thread, synctest bubble 3]:", 9, true, true},
		{"goroutine 12 [running", 12, false, true}, // truncated buffer
		{"goroutine x [running]:", 0, false, false},
		{"goroutine 5 [chan receive]:", 0, false, false},
		{"", 0, false, false},
		{"gorout", 0, false, false},
	} {
		id, locked, ok := parseHeader([]byte(c.in))
		if id != c.id || locked != c.locked || ok != c.ok {
			t.Errorf("parseHeader(%q) = %d, %v, %v; want %d, %v, %v", c.in, id, locked, ok, c.id, c.locked, c.ok)
		}
	}
}

func TestGoroutineStateDoesNotAllocate(t *testing.T) {
	GoroutineState()
	if n := testing.AllocsPerRun(100, func() { GoroutineState() }); n != 0 {
		t.Errorf("GoroutineState allocates %.1f times per call", n)
	}
}
