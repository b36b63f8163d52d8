package sched

import (
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PIMutex is a mutual-exclusion lock with priority inheritance, on a
// futex word that holds the owner's thread id (FUTEX_LOCK_PI, the lock
// under pthread mutexes with PTHREAD_PRIO_INHERIT). While a thread waits
// for it, the kernel runs the owner at the waiter's priority if that is
// higher: a SCHED_OTHER thread preempted by CPU hogs while it holds the
// lock is boosted to SCHED_FIFO as soon as an RT worker waits for it, so
// the RT worker waits for the critical section only, not for the hogs.
// A sync.Mutex cannot do that, and its contended path parks the waiting
// goroutine through the Go scheduler, which for a locked worker thread
// means handing its P to another thread and back.
//
// The owner is a thread, so Lock locks the calling goroutine to its thread
// (runtime.LockOSThread) until Unlock, which must be called by the same
// goroutine. An uncontended Lock/Unlock is a gettid system call (LockOn
// saves it), two compare-and-swaps and the lock/unlock of the thread; a
// contended Lock spins
// briefly, then sleeps in the kernel. The zero value is unlocked; a
// PIMutex must not be copied after first use. Locking it twice from one
// thread is a bug and panics (the kernel reports EDEADLK).
type PIMutex struct {
	word  atomic.Uint32 // futex word: 0 when free, else the owner's tid, with futexWaiters while the kernel queues waiters
	owner uint32        // guarded by the mutex: the owner's tid, so that Unlock needs no gettid
	// seq is bumped by every Unlock and read by every Lock. It orders the
	// critical sections for the race detector, which does not see the
	// hand-over that FUTEX_UNLOCK_PI does inside the kernel.
	seq atomic.Uint32
	// Waits counts the Locks that found the mutex held (contended).
	Waits atomic.Int64
}

const (
	futexLockPIPrivate   = 6 | 128 // FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG
	futexUnlockPIPrivate = 7 | 128 // FUTEX_UNLOCK_PI | FUTEX_PRIVATE_FLAG
	futexWaiters         = 0x80000000
	futexOwnerDied       = 0x40000000

	// piSpin is how many times a contended Lock looks at the word before
	// it sleeps in the kernel: the pool's critical sections are a few
	// hundred ns, about what this many loads take.
	piSpin = 100
)

// Lock locks m, waiting if another thread holds it. It locks the calling
// goroutine to its thread until Unlock.
func (m *PIMutex) Lock() {
	runtime.LockOSThread()
	m.lock(uint32(unix.Gettid()))
}

// LockOn is Lock for a goroutine that keeps a ThreadCheck of its thread
// (a worker): while c.Same() holds, the owner's tid is c.Tid() and the
// gettid system call is saved; otherwise it is Lock. The futex word must
// hold the owner's true tid: the kernel boosts that thread for a waiter
// and refuses FUTEX_UNLOCK_PI (EPERM) to any other, and Same is exact
// (see ThreadCheck), so the word never names another thread. c is read
// only; it must be the caller's own.
func (m *PIMutex) LockOn(c *ThreadCheck) {
	runtime.LockOSThread()
	if c.Same() {
		m.lock(uint32(c.Tid()))
		return
	}
	m.lock(uint32(unix.Gettid()))
}

// lock takes m for thread tid, the caller's, which is locked to it.
func (m *PIMutex) lock(tid uint32) {
	if !m.word.CompareAndSwap(0, tid) {
		m.Waits.Add(1)
		m.lockSlow(tid)
	}
	m.seq.Load()
	m.owner = tid
}

func (m *PIMutex) lockSlow(tid uint32) {
	for i := 0; i < piSpin; i++ {
		if m.word.Load() == 0 && m.word.CompareAndSwap(0, tid) {
			return
		}
	}
	for {
		// Blocks: the runtime may hand this thread's P to other goroutines
		// meanwhile (entersyscall).
		_, _, e := syscall.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&m.word)), futexLockPIPrivate, 0, 0, 0, 0)
		switch e {
		case 0:
			return
		case unix.EINTR, unix.EAGAIN: // a signal; the owner is exiting: try again
			if m.word.Load() == 0 && m.word.CompareAndSwap(0, tid) {
				return
			}
		case unix.EDEADLK:
			runtime.UnlockOSThread() // Lock's: the lock is not taken
			panic("sched: PIMutex locked twice by one thread")
		default:
			runtime.UnlockOSThread()
			panic("sched: FUTEX_LOCK_PI: " + e.Error())
		}
	}
}

// Unlock unlocks m and unlocks the goroutine from its thread (one level of
// runtime.LockOSThread). It must be called by the goroutine that locked m.
// It never blocks: with waiters, the kernel hands the lock to the highest
// priority one.
func (m *PIMutex) Unlock() {
	tid := m.owner
	m.owner = 0
	m.seq.Add(1)
	if !m.word.CompareAndSwap(tid, 0) {
		for {
			_, _, e := syscall.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&m.word)), futexUnlockPIPrivate, 0, 0, 0, 0)
			if e == 0 {
				break
			}
			if e != unix.EINTR {
				panic("sched: FUTEX_UNLOCK_PI: " + e.Error())
			}
		}
	}
	runtime.UnlockOSThread()
}
