package sched

import (
	"runtime"
	"testing"
)

// TestThreadCheckCatchesTokenReuse: a thread's token can be the token of
// a thread that exited (the runtime or libc reuses the TLS block: seen in
// 40-60% of tries here), so the token alone cannot tell a worker that it
// left its thread when the thread it left died and a new one took its
// place. ThreadCheck also compares the tid every 64th check: a reused token
// with another tid is caught within 64 items.
func TestThreadCheckCatchesTokenReuse(t *testing.T) {
	reused := 0
	for i := 0; i < 50; i++ {
		ch := make(chan [2]uint64)
		go func() {
			runtime.LockOSThread() // ends locked: its thread exits
			ch <- [2]uint64{ThreadToken(), uint64(Gettid())}
		}()
		a := <-ch
		runtime.Gosched()
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ch <- [2]uint64{ThreadToken(), uint64(Gettid())}
		}()
		b := <-ch
		if a[0] == b[0] && a[1] != b[1] {
			reused++
		}
	}
	t.Logf("a new thread had an exited thread's token in %d of 50 tries", reused)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c ThreadCheck
	c.Set()
	for i := 0; i < 200; i++ {
		if !c.Same() {
			t.Fatalf("check %d: not the same thread, on the thread it was set on", i)
		}
	}
	// Same token, another tid: what a new thread with a dead one's TLS
	// block looks like.
	c.tid = -1
	caught := false
	for i := 0; i < 64 && !caught; i++ {
		caught = !c.Same()
	}
	if !caught {
		t.Fatal("a reused token with another tid passed 64 checks")
	}
}

// TestReservePKeepsUserGOMAXPROCS: a GOMAXPROCS the program sets while a
// reservation is held survives the next reservations and releases (an RT
// pool made or destroyed, the CM monitor stopping). Fault caught: ReserveP
// set GOMAXPROCS from a base captured at the first reservation, overwriting
// the program's setting.
func TestReservePKeepsUserGOMAXPROCS(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(orig)
	ReserveP(1) // the CM monitor starts
	user := orig + 3
	runtime.GOMAXPROCS(user) // the program's own setting
	ReserveP(1)              // an RT pool is made
	got := runtime.GOMAXPROCS(0)
	ReserveP(-1)
	ReserveP(-1) // the monitor stops
	after := runtime.GOMAXPROCS(0)
	if got != user+1 {
		t.Errorf("after the program set GOMAXPROCS=%d, reserving one P gave %d, want %d", user, got, user+1)
	}
	if after != user {
		t.Errorf("after the reservations ended, GOMAXPROCS = %d, want the program's %d", after, user)
	}
}
