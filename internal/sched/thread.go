package sched

import (
	"runtime"
	"sync"

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

// reserved Ps for RT threads; see docs/design.md "The wake path".
var pReserve struct {
	mu    sync.Mutex
	base  int
	extra int
}

// ReserveP raises (n > 0) or lowers (n < 0) GOMAXPROCS by n, process-wide,
// for RT threads: each RT worker pool (package wq) and each RT kthread
// worker reserves one P for its life, so that when the futex wakes it under
// load it finds an idle P instead of queueing behind busy goroutines. The
// base is the GOMAXPROCS in force when the first reservation is made and is
// restored when the last one is released. Changing GOMAXPROCS stops the
// world, which under CPU load can take milliseconds, so callers reserve when
// a pool or thread is created or destroyed, never per item. Safe from any
// goroutine; it blocks for the stop-the-world.
func ReserveP(n int) {
	r := &pReserve
	r.mu.Lock()
	defer r.mu.Unlock()
	if n == 0 {
		return
	}
	if r.extra == 0 {
		r.base = runtime.GOMAXPROCS(0)
	}
	r.extra += n
	if r.extra < 0 {
		r.extra = 0
	}
	runtime.GOMAXPROCS(r.base + r.extra)
}
