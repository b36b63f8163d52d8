package sched

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// GoLocked runs fn in a new goroutine locked (runtime.LockOSThread) to an
// OS thread that is not the process's main thread, and never unlocks it:
// when fn returns, the goroutine exits locked and the runtime destroys the
// thread. fn may therefore change the thread's affinity, nice or policy.
//
// The main thread must be avoided: its attributes are the process's (what
// sched_getaffinity(getpid()) and taskset -p report), and the runtime
// cannot destroy it, so a locked goroutine that exits there leaves the
// thread parked with whatever attributes it was given. GoLocked does not
// block.
func GoLocked(fn func()) {
	go lockedStart(fn, nil)
}

func lockedStart(fn func(), started chan<- struct{}) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// Hold the main thread so that the new goroutine cannot start on
		// it, and let it go only once the new goroutine has its own thread.
		ch := make(chan struct{})
		go lockedStart(fn, ch)
		<-ch
		runtime.UnlockOSThread()
		if started != nil {
			close(started)
		}
		return
	}
	if started != nil {
		close(started)
	}
	fn()
}

// OnMainThread reports whether the caller runs on the process's main
// thread (tid == pid).
func OnMainThread() bool { return unix.Gettid() == unix.Getpid() }
