package wq

import (
	"runtime"
	"testing"
	"time"

	"github.com/gowq/wq/internal/sched"
	"golang.org/x/sys/unix"
)

func kickAllPools() {
	r := &poolRegistry
	r.mu.Lock()
	var ps []*pool
	for _, o := range r.m {
		ps = append(ps, o)
	}
	r.mu.Unlock()
	for _, o := range ps {
		o.mu.Lock()
		if !o.dead {
			o.kick()
		}
		o.mu.Unlock()
	}
}

// sleepingThread returns the tid of a thread asleep in futex_wait on a
// held sched.Mutex, and the func that lets it go.
func sleepingThread(t *testing.T) (int, func()) {
	var lock sched.Mutex
	lock.Lock()
	tidc := make(chan int)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		lock.Lock()
		lock.Unlock()
		close(done)
	}()
	tid := <-tidc
	release := func() { lock.Unlock(); <-done }
	sr, err := sched.OpenStat(tid)
	if err != nil {
		release()
		t.Fatal(err)
	}
	defer sr.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		st, err := sr.State()
		if err != nil {
			release()
			t.Fatal(err)
		}
		if sched.Sleeping(st) {
			return tid, release
		}
		if time.Now().After(deadline) {
			release()
			t.Fatalf("the thread never went to sleep on the lock (state %c)", st)
		}
		time.Sleep(time.Millisecond)
	}
}
