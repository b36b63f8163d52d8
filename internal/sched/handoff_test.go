package sched

import (
	"runtime"
	"testing"
	"time"
)

// TestParkHandOffWakes: ParkHandOff consumes a pending token at once and
// returns after an Unpark from another goroutine, with and without the
// stamp. Fault caught: a hand-off wait that loses the token or never
// returns (a broken entersyscallblock bracket).
func TestParkHandOffWakes(t *testing.T) {
	var p Parker
	p.Unpark()
	p.ParkHandOff() // token pending: returns at once
	for _, stamp := range []bool{false, true} {
		done := make(chan int64, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var out int64
			if stamp {
				p.ParkStampHandOff(&out)
			} else {
				p.ParkHandOff()
			}
			done <- out
		}()
		deadline := time.Now().Add(time.Minute)
		for !p.Sleeping() {
			if time.Now().After(deadline) {
				t.Fatal("the parker never went to sleep")
			}
			time.Sleep(100 * time.Microsecond)
		}
		before := Nanotime()
		p.Unpark()
		select {
		case out := <-done:
			if stamp && out < before {
				t.Fatalf("stamp %d is before the Unpark at %d", out, before)
			}
		case <-time.After(time.Minute):
			t.Fatal("ParkHandOff did not return after Unpark")
		}
	}
}

// TestRunnableBehindSeesReadiedGoroutine: with one P, a goroutine readied
// by the caller is runnable behind it, and with none readied nothing is.
// Fault caught: a test that never reports the readied goroutine (the
// worker would keep its P and the goroutine would wait for sysmon).
func TestRunnableBehindSeesReadiedGoroutine(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	ch := make(chan struct{})
	ran := make(chan struct{})
	go func() {
		<-ch
		close(ran)
	}()
	runtime.Gosched() // let it block on ch
	ch <- struct{}{}  // readies it into this P
	if !RunnableBehind() {
		t.Error("RunnableBehind is false with a goroutine readied on the only P")
	}
	<-ran
}
