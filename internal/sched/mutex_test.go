package sched

import (
	"runtime"
	"sync"
	"testing"
)

// TestMutexExclusion: goroutines that increment a plain counter under the
// Mutex, half of them locked to threads (as workers are), lose no
// increment, and the race detector sees the critical sections ordered.
func TestMutexExclusion(t *testing.T) {
	var m Mutex
	var n int
	const g, iters = 8, 20000
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(locked bool) {
			defer wg.Done()
			if locked {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			for j := 0; j < iters; j++ {
				m.Lock()
				n++
				m.Unlock()
			}
		}(i%2 == 0)
	}
	wg.Wait()
	if n != g*iters {
		t.Fatalf("counter %d, want %d", n, g*iters)
	}
	if m.word.Load() != mutexFree {
		t.Fatalf("word %d after the last Unlock, want free", m.word.Load())
	}
}

// TestMutexSleepingWaiter: a waiter that has gone to sleep in the kernel
// (the word marked contended) is woken by Unlock and gets the lock; Waits
// counts it; TryLock fails while the lock is held.
func TestMutexSleepingWaiter(t *testing.T) {
	var m Mutex
	m.Lock()
	if m.TryLock() {
		t.Fatal("TryLock took a held Mutex")
	}
	got := make(chan struct{})
	go func() {
		m.Lock()
		m.Unlock()
		close(got) // after the Unlock: the TryLock below must find it free
	}()
	for m.word.Load() != mutexWaiters {
		runtime.Gosched() // the waiter has spun out and marked the word
	}
	m.Unlock()
	<-got
	if w := m.Waits.Load(); w != 1 {
		t.Errorf("Waits = %d, want 1", w)
	}
	if !m.TryLock() {
		t.Fatal("TryLock failed on a free Mutex")
	}
	m.Unlock()
}

// TestMutexUnlockUnlocked panics with a clear message.
func TestMutexUnlockUnlocked(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("Unlock of an unlocked Mutex did not panic")
		}
	}()
	var m Mutex
	m.Unlock()
}
