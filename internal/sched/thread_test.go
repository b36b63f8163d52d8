package sched

import (
	"runtime"
	"testing"
	"time"
)

// TestThreadCheckExactAfterThreadExit: a thread's TLS block (its FS base)
// can be the one of a thread that exited (the runtime reuses the memory:
// seen in 40-60% of tries here), so a check by FS base alone told a new
// thread that it was the dead one. A ThreadCheck set on a thread that
// exited must report false on any other thread, at the first check:
// PIMutex.LockOn writes Tid into a PI futex word when Same holds.
func TestThreadCheckExactAfterThreadExit(t *testing.T) {
	for i := 0; i < 50; i++ {
		var c ThreadCheck
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // ends locked: its thread exits
			c.Set()
			close(done)
		}()
		<-done
		runtime.Gosched()
		same := make(chan bool)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			same <- c.Same()
		}()
		if <-same {
			t.Fatalf("try %d: a new thread passed the check of a thread that exited", i)
		}
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var c ThreadCheck
	if c.Same() {
		t.Fatal("a check never Set reports the same thread")
	}
	c.Set()
	for i := 0; i < 200; i++ {
		if !c.Same() {
			t.Fatalf("check %d: not the same thread, on the thread it was set on", i)
		}
	}
	if c.Tid() != Gettid() {
		t.Fatalf("Tid() = %d, want the thread's %d", c.Tid(), Gettid())
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

// RuntimeNice ignores the threads of GoLocked goroutines, running and
// ended (the runtime destroys an ended one's thread a moment later, with
// the nice it was given). Catches a niced worker thread read as one the
// runtime may run goroutines on.
func TestRuntimeNiceIgnoresEndingGoLockedThreads(t *testing.T) {
	base, uniform := RuntimeNice()
	if !uniform {
		t.Skip("the process's threads have different nices already")
	}
	if base >= 19 {
		t.Skip("the process runs at nice 19: no higher nice for a thread")
	}
	for i := range 50 {
		set, done := make(chan error, 1), make(chan struct{})
		proceed := make(chan struct{})
		if err := GoLocked(func() {
			set <- SetAttr(0, Attr{Policy: PolicyNormal, Nice: base + 1})
			<-proceed
			close(done)
		}); err != nil {
			t.Fatal(err)
		}
		if err := <-set; err != nil {
			t.Fatal(err)
		}
		if n, u := RuntimeNice(); !u || n != base {
			t.Fatalf("round %d: RuntimeNice = %d, %v with a GoLocked thread at %d, want %d, true", i, n, u, base+1, base)
		}
		close(proceed)
		<-done
		if n, u := RuntimeNice(); !u || n != base {
			t.Fatalf("round %d: RuntimeNice = %d, %v right after a GoLocked goroutine at nice %d ended, want %d, true", i, n, u, base+1, base)
		}
	}
}

// The threads of ended GoLocked goroutines are forgotten after endingFor
// also in a process that never calls RuntimeNice (no niced queue): one
// entry per worker thread that ever ended was kept until a RuntimeNice.
func TestEndingThreadsForgottenWithoutRuntimeNice(t *testing.T) {
	end := func() {
		done := make(chan struct{})
		if err := GoLocked(func() { close(done) }); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	for range 20 {
		end()
	}
	// The last unclaim runs just after done is closed.
	waitEnding := func(min int) int {
		for range 1000 {
			claims.mu.Lock()
			n := len(claims.ending)
			claims.mu.Unlock()
			if n >= min {
				return n
			}
			time.Sleep(time.Millisecond)
		}
		return -1
	}
	if n := waitEnding(1); n < 1 {
		t.Fatal("no ended thread recorded: nothing to test")
	}
	// Age them past endingFor, as if no RuntimeNice ran for that long.
	claims.mu.Lock()
	for tid, at := range claims.ending {
		claims.ending[tid] = at - 2*endingFor
	}
	claims.mu.Unlock()
	end()
	n := 0
	for range 1000 { // until its unclaim ran (it comes just after done)
		claims.mu.Lock()
		n = len(claims.ending)
		claims.mu.Unlock()
		if n <= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n > 1 {
		t.Errorf("%d ended threads still recorded after endingFor, want at most the last one", n)
	}
}
