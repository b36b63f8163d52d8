package sched

import (
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mutex is a mutual-exclusion lock on a futex word (the three-state futex
// mutex of Drepper's "Futexes Are Tricky"): 0 free, 1 held, 2 held with
// possible waiters. A contended Lock spins briefly and then sleeps in
// futex_wait, in the kernel, on the calling thread.
//
// It is the pool lock of gowq's non-RT pools. sync.Mutex would do, but its
// contended path parks the waiting goroutine through the Go scheduler,
// and a worker's goroutine is locked to its thread: parking it puts the
// thread to sleep, hands its P to another thread, and the Unlock that
// readies it must wake that thread and hand a P back (two or three futex
// wake-ups and context switches, where this lock needs one). The critical
// sections it guards are a few hundred ns, so most contended Locks end in
// the spin.
//
// Unlike PIMutex it has no owner and no priority inheritance: any
// goroutine may Unlock it, and Lock does not lock the goroutine to its
// thread. An uncontended Lock is one compare-and-swap, an Unlock one swap.
// The zero value is unlocked; a Mutex must not be copied after first use.
type Mutex struct {
	word atomic.Uint32
	// Waits counts the Locks that found the mutex held (contended).
	Waits atomic.Int64
}

const (
	mutexFree    = 0
	mutexHeld    = 1
	mutexWaiters = 2

	// mutexSpin is how many times a contended Lock looks at the word
	// before it sleeps: about a microsecond, longer than the pool's
	// critical sections and shorter than a futex sleep and wake-up.
	mutexSpin = 4000
)

// Lock locks m, waiting if it is held. Blocks: spins, then sleeps in the
// kernel (futex_wait) until an Unlock wakes it.
func (m *Mutex) Lock() {
	if m.word.CompareAndSwap(mutexFree, mutexHeld) {
		return
	}
	m.Waits.Add(1)
	m.lockSlow()
}

// TryLock locks m if it is free and reports whether it did. Never blocks.
func (m *Mutex) TryLock() bool {
	return m.word.CompareAndSwap(mutexFree, mutexHeld)
}

func (m *Mutex) lockSlow() {
	for i := 0; i < mutexSpin; i++ {
		v := m.word.Load()
		if v == mutexFree && m.word.CompareAndSwap(mutexFree, mutexHeld) {
			return
		}
		if v == mutexWaiters {
			break // others sleep already: queue behind them
		}
	}
	// Mark the word contended; whoever holds it wakes one sleeper at
	// Unlock. Taking it here leaves it marked contended, which at worst
	// costs the next Unlock one needless futex_wake.
	for m.word.Swap(mutexWaiters) != mutexFree {
		// Returns at once if the word is no longer mutexWaiters; EINTR
		// (Go's preemption signals) and spurious wake-ups loop.
		syscall.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&m.word)),
			futexWaitPrivate, mutexWaiters, 0, 0, 0)
	}
}

// Unlock unlocks m and wakes one sleeping waiter, if any. Never blocks.
// Unlocking an unlocked Mutex panics.
func (m *Mutex) Unlock() {
	switch m.word.Swap(mutexFree) {
	case mutexHeld:
	case mutexWaiters:
		syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&m.word)),
			futexWakePrivate, 1, 0, 0, 0)
	default:
		panic("sched: unlock of unlocked Mutex")
	}
}
