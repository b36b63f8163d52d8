package sched

import (
	"runtime"
	"testing"
)

// GoroutineID agrees with the traceback header on the test goroutine, on
// new goroutines and on a goroutine locked to its thread, and the fast
// path is the one in use on this Go release. Catches ids read from a
// wrong offset of the runtime's g (a Go release the library does not
// know), which would make every identity check lie.
func TestGoroutineIDMatchesTraceback(t *testing.T) {
	if !fastGoid {
		t.Errorf("the fast goroutine id does not match the traceback header on %s: identity checks cost about 2 us", runtime.Version())
	}
	check := func() {
		want, _, ok := GoroutineState()
		got, gok := GoroutineID()
		if !ok || !gok || got != want {
			t.Errorf("GoroutineID() = %d, %v; traceback header %d, %v", got, gok, want, ok)
		}
	}
	check()
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			check()
		}()
	}
	go func() {
		defer func() { done <- struct{}{} }()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		check()
	}()
	for range 9 {
		<-done
	}
}
