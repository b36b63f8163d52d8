package sched

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPIMutexExclusion: goroutines on many threads increment a plain
// counter under the mutex; any overlap of critical sections loses
// increments (and -race reports it).
func TestPIMutexExclusion(t *testing.T) {
	var m PIMutex
	n, per := 4, 5000
	if testing.Short() {
		per = 1000
	}
	counter := 0
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				m.Lock()
				c := counter
				if i%64 == 0 {
					runtime.Gosched() // a holder that yields: others wait in the kernel
				}
				counter = c + 1
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	if counter != n*per {
		t.Fatalf("counter = %d, want %d: critical sections overlapped", counter, n*per)
	}
	if w := m.word.Load(); w != 0 {
		t.Fatalf("futex word = %#x after the last Unlock, want 0", w)
	}
	// Holders yield with the lock held, so others must have found it held.
	if m.Waits.Load() == 0 {
		t.Fatalf("Waits = 0 after %d yields inside the critical section", n*per/64)
	}
}

// TestPIMutexBoostsOwner: while a SCHED_FIFO thread waits for the mutex,
// the kernel runs its SCHED_OTHER owner at the waiter's priority (the
// owner's effective priority in /proc/<tid>/stat becomes an RT one), and
// back at its own once it unlocks. Needs RT permission.
func TestPIMutexBoostsOwner(t *testing.T) {
	if err := CheckRT(1); err != nil {
		t.Skip("SCHED_FIFO not permitted:", err)
	}
	var m PIMutex
	ownerTID := make(chan int, 1)
	release := make(chan struct{})
	ownerDone := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(ownerDone)
		m.Lock()
		ownerTID <- Gettid()
		<-release
		m.Unlock()
	}()
	tid := <-ownerTID
	if p := statPriority(t, tid); p < 0 {
		t.Fatalf("owner's priority is %d before any RT waiter (the test thread's class leaked?)", p)
	}
	got := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := SetAttr(0, Attr{Policy: PolicyFIFO, Priority: 1}); err != nil {
			got <- err
			return
		}
		m.Lock()
		m.Unlock()
		got <- ResetThread(0)
	}()
	boosted := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if statPriority(t, tid) < 0 {
			boosted = true
			break
		}
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	<-ownerDone
	if !boosted {
		t.Fatal("the owner was never boosted to the FIFO waiter's priority")
	}
}

// statPriority reads field 18 (priority) of /proc/self/task/<tid>/stat:
// 20+nice for SCHED_OTHER, -1-rtprio for RT (effective, so PI boosts show).
func statPriority(t *testing.T, tid int) int {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, err := strconv.Atoi(f[15])
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// TestPIMutexLockOnExclusion: goroutines with a ThreadCheck of their
// thread take the mutex with LockOn, others with Lock, holders yield
// inside the critical section so that others wait in the kernel. Faults
// caught: LockOn not excluding (lost increments, -race), or a futex word
// that names another thread than the owner (the kernel then refuses the
// owner's FUTEX_UNLOCK_PI, which panics, or boosts the wrong thread).
func TestPIMutexLockOnExclusion(t *testing.T) {
	var m PIMutex
	n, per := 4, 3000
	if testing.Short() {
		per = 500
	}
	counter := 0
	var wrong sync.Map
	var wg sync.WaitGroup
	for g := 0; g < n; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var c ThreadCheck
			c.Set()
			for i := 0; i < per; i++ {
				if g%2 == 0 {
					m.LockOn(&c)
				} else {
					m.Lock()
				}
				if tid := m.word.Load() &^ (futexWaiters | futexOwnerDied); tid != uint32(Gettid()) {
					wrong.Store(g, tid)
				}
				v := counter
				if i%64 == 0 {
					runtime.Gosched()
				}
				counter = v + 1
				m.Unlock()
			}
		}()
	}
	wg.Wait()
	if counter != n*per {
		t.Fatalf("counter = %d, want %d: critical sections overlapped", counter, n*per)
	}
	wrong.Range(func(g, tid any) bool {
		t.Errorf("goroutine %v held the mutex with tid %v in the futex word, not its own", g, tid)
		return true
	})
	if w := m.word.Load(); w != 0 {
		t.Fatalf("futex word = %#x after the last Unlock, want 0", w)
	}
	if m.Waits.Load() == 0 {
		t.Fatal("Waits = 0: the test never contended")
	}
}

// TestPIMutexLockOnOtherThread: LockOn with a check recorded on another
// thread (one that exited, whose TLS block a new thread may reuse) must
// write the caller's own tid, not the recorded one. Fault caught: LockOn
// trusting Tid without Same, or a Same fooled by a reused thread block.
func TestPIMutexLockOnOtherThread(t *testing.T) {
	var m PIMutex
	for i := 0; i < 20; i++ {
		var c ThreadCheck
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread() // ends locked: its thread exits
			c.Set()
			close(done)
		}()
		<-done
		runtime.Gosched()
		res := make(chan [2]uint32)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			m.LockOn(&c)
			w := m.word.Load()
			m.Unlock()
			res <- [2]uint32{w, uint32(Gettid())}
		}()
		if r := <-res; r[0] != r[1] {
			t.Fatalf("try %d: futex word %d while held by thread %d (the check was set on thread %d)", i, r[0], r[1], c.Tid())
		}
	}
}
