package wq

import (
	"errors"
	"runtime"
	"syscall"
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

// pendedItem returns a new item whose PENDING the caller owns, and the
// channel its function signals when it runs.
func pendedItem(t *testing.T) (*Work, chan struct{}) {
	t.Helper()
	ran := make(chan struct{}, 1)
	w := NewWork(func() { ran <- struct{}{} })
	if err := w.pendOn(nil); err != nil {
		t.Fatalf("pendOn of a new item: %v", err)
	}
	return w, ran
}

// waitRan fails the test with msg unless ran is signalled within 30 s.
func waitRan(t *testing.T, ran chan struct{}, msg string) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal(msg)
	}
}

// fakeScanner makes p look as if a worker were between items, so that
// queue calls push (tryPush); the returned func undoes it and drains.
func fakeScanner(p *pool) func() {
	p.scanners.Add(1)
	return func() {
		p.scanners.Add(-1)
		p.mu.Lock()
		p.mu.Unlock()
	}
}

// setPoolNice gives the unbound queue q nice want, so that q gets a pool of
// its own (unbound pools are shared by attributes). SetNice refuses, with
// ErrPermission, a nice below the one the process's threads start with
// when it may not lower a nice (unprivileged under nice -n 19); q then
// gets nice 19, which any thread may take: still a pool apart from the
// nice-0 one. It returns the nice set.
func setPoolNice(t testing.TB, q *Workqueue, want int) int {
	t.Helper()
	err := q.SetNice(want)
	if errors.Is(err, ErrPermission) && want != 19 {
		t.Logf("nice %d refused (%v); nice 19 instead", want, err)
		want, err = 19, q.SetNice(19)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// moveOffThread, called from a work function on a thread worker, unlocks
// the worker's goroutine from its thread (every LockOSThread level) and
// blocks until the goroutine runs on another thread: a helper goroutine
// locks the old thread while this one sleeps. It reports whether the
// goroutine moved. The worker is retired after the item (its thread was
// lost).
func moveOffThread() bool {
	old := syscall.Gettid()
	for range 200 {
		runtime.UnlockOSThread()
	}
	for range 200 {
		release := make(chan struct{})
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			<-release
			runtime.UnlockOSThread()
		}()
		time.Sleep(50 * time.Microsecond)
		moved := syscall.Gettid() != old
		<-locked
		close(release)
		if moved {
			return true
		}
	}
	return false
}
