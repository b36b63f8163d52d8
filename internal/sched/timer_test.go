package sched

import (
	"testing"
	"time"
)

// TestParkUntil: a passed deadline returns false, a pending token true,
// an Unpark during the wait true, and the wait never ends before its
// deadline without a token.
func TestParkUntil(t *testing.T) {
	var p Parker
	if p.ParkUntil(MonoNow() - 1) {
		t.Fatal("ParkUntil of a passed deadline consumed a token")
	}
	p.Unpark()
	if !p.ParkUntil(MonoNow() + int64(time.Hour)) {
		t.Fatal("ParkUntil did not consume the pending token")
	}
	dl := MonoNow() + int64(2*time.Millisecond)
	if p.ParkUntil(dl) {
		t.Fatal("ParkUntil with no Unpark reported a token")
	}
	if now := MonotonicNs(); now < dl {
		t.Fatalf("ParkUntil returned %v before its deadline", time.Duration(dl-now))
	}
	done := make(chan bool)
	go func() { done <- p.ParkUntil(MonoNow() + int64(time.Hour)) }()
	for !p.Sleeping() {
		time.Sleep(50 * time.Microsecond)
	}
	p.Unpark()
	if !<-done {
		t.Fatal("ParkUntil woken by Unpark reported a timeout")
	}
}

// TestMonoNowNotBehind: MonoNow never reads earlier than CLOCK_MONOTONIC
// read just before it.
func TestMonoNowNotBehind(t *testing.T) {
	for range 1000 {
		before := MonotonicNs()
		if now := MonoNow(); now < before {
			t.Fatalf("MonoNow %d behind CLOCK_MONOTONIC %d", now, before)
		}
	}
}
