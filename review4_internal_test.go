package wq

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/sched"
)

// TestReview4BouncedPushCounted: a push bounced by a pwq that an attribute
// change retired is counted in Stats (Pushed and Bounced). It failed when
// the counters lived on the pwq: the retired pwq's counters had already
// been folded into the queue's (retireIdle) when the queuer added to them.
func TestReview4BouncedPushCounted(t *testing.T) {
	q, err := Alloc("review4-bounce", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	old := q.table.Load().dfl
	undo := fakeScanner(old.pool)
	setPoolNice(t, q, 5) // a new pwq; the idle old one retires
	old.pool.mu.Lock()
	dead := old.dead
	old.pool.mu.Unlock()
	if !dead {
		t.Fatal("the attribute change did not retire the old pwq")
	}
	w, ran := pendedItem(t)
	if q.tryPush(cpuUnbound, old, w) {
		t.Fatal("tryPush reported the item queued on a retired pwq")
	}
	undo()
	if !q.queuePended(cpuUnbound, w) {
		t.Fatal("locked queue of the bounced item failed")
	}
	waitRan(t, ran, "the bounced item never ran")
	if st := q.Stats(); st.Bounced != 1 || st.Pushed < 1 {
		t.Errorf("Stats: Pushed %d, Bounced %d; want Bounced 1 and Pushed >= 1", st.Pushed, st.Bounced)
	}
}

// TestReview4CMSleepBeforeFn: a worker's thread seen asleep just before
// its work function (in the pool lock of scanOff, or Work.mu in startRun)
// whose function has started by the time the CM monitor reads inFn is not
// a blocked item: that sleep was outside fn, and the thread now runs fn.
// It failed when cmSample read inFn only after the state (it took the
// lock wait for a blocked item and woke a second worker of a per-CPU pool
// while the first ran). cmStateHook, between the two reads, plays the
// worker starting fn.
func TestReview4CMSleepBeforeFn(t *testing.T) {
	tid, release := sleepingThread(t)
	defer release()
	p := &pool{key: poolKey{cpu: 0}, cm: true, cpus: []int{0}}
	p.busy.Store(1)
	pq := &pwq{pool: p}
	wk := &worker{pool: p, tid: tid, gen: 1, current: NewWork(func() {}), currentPwq: pq, counted: true, currentAt: nanotime()}
	spare := &worker{pool: p}
	p.workers = []*worker{wk, spare}
	p.idle = []*worker{spare}
	spare.idle = true
	p.nrRunning = 1
	p.worklist.pushBack(NewWork(func() {})) // work pending behind it
	h := func() { wk.inFn.Store(true) }     // fn starts after the state read
	cmStateHook.Store(&h)
	defer cmStateHook.Store(nil)
	stats := map[int]*statEntry{}
	_, _, sawSleep := p.cmSample(nanotime(), nil, stats, 1, true)
	for _, e := range stats {
		_ = e.r.Close()
	}
	p.mu.wake = nil
	if sawSleep || wk.sleeping || !wk.counted || p.nrRunning != 1 || pq.stats.cmWakeups.Load() != 0 {
		t.Errorf("asleep before fn, in fn at the inFn read: sawSleep %v sleeping %v counted %v nr_running %d CMW %d; want it still running",
			sawSleep, wk.sleeping, wk.counted, p.nrRunning, pq.stats.cmWakeups.Load())
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
