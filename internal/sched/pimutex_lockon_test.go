package sched

import (
	"runtime"
	"sync"
	"testing"
)

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
