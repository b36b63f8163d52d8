package sched

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
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

// TestReservePKeepsUserGOMAXPROCS: since today the CM monitor calls
// ReserveP(1) whenever a pool of any class exists, and ReserveP sets
// GOMAXPROCS to a base captured at the first reservation: a GOMAXPROCS the
// program sets while wq pools exist is overwritten by the next reservation
// or release (an RT pool made or destroyed, the monitor stopping). KNOWN
// FAILING (not fixed; a design choice to make: reserve relative to the
// current value).
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

// TestPIMutexRelockPanicUnlocksThread: a second Lock from the
// owner's thread panics (EDEADLK). That is how a tracer that queues on an
// RT pool from an event traced under that pool's lock fails, and the
// tracer's panic is recovered (wq's emit); the goroutine must not stay
// locked to its thread by the failed Lock's LockOSThread. Seen by the
// thread: a goroutine that ends locked takes its thread with it. (Failed
// before the fix.)
func TestPIMutexRelockPanicUnlocksThread(t *testing.T) {
	var m PIMutex
	tidc := make(chan int)
	go func() {
		m.Lock()
		func() {
			defer func() { _ = recover() }()
			m.Lock()
		}()
		m.Unlock()
		tidc <- Gettid()
	}()
	tid := <-tidc
	if tid == os.Getpid() {
		t.Skip("ran on the main thread, which never exits")
	}
	time.Sleep(200 * time.Millisecond) // the goroutine ends; a locked thread would exit
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err != nil {
		t.Errorf("thread %d exited with the goroutine: the failed Lock left it locked (%v)", tid, err)
	}
}
