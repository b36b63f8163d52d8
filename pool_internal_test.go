package wq

import (
	"errors"
	"runtime"
	"testing"

	"github.com/gowq/wq/internal/sched"
)

// TestSpinOK: the conditions under which a worker spins before parking
// (worker.go, "Spinning before parking"). The test thread is pinned to the
// CPU it is on, so that "the queuer's CPU" is stable, and unpinned after.
func TestSpinOK(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	old, err := sched.Affinity(0)
	if err != nil {
		t.Skip("cannot read the thread's affinity:", err)
	}
	cpu := sched.GetCPU()
	if err := sched.SetAffinity(0, []int{cpu}); err != nil {
		t.Skip("cannot pin the test thread:", err)
	}
	defer sched.SetAffinity(0, old)
	other := cpu + 1

	mk := func() (*pool, *worker) {
		p := &pool{key: poolKey{cpu: -1}, mayspin: true, cpus: []int{0, 1}, lastQueueCPU: other}
		p.mu.Lock() // a bare pool, never unlocked: the policy functions assert the lock (wqdebug)
		return p, &worker{pool: p, lastPark: 1000}
	}
	cases := []struct {
		name string
		edit func(p *pool, wk *worker)
		want bool
	}{
		{"unbound, recent short park, queuer elsewhere", func(p *pool, wk *worker) {}, true},
		{"RT or per-CPU (mayspin false)", func(p *pool, wk *worker) { p.mayspin = false }, false},
		{"one CPU", func(p *pool, wk *worker) { p.cpus = []int{0} }, false},
		{"queuer on this CPU", func(p *pool, wk *worker) { p.lastQueueCPU = cpu }, false},
		{"queuer CPU unknown", func(p *pool, wk *worker) { p.lastQueueCPU = -1 }, false},
		{"last park long", func(p *pool, wk *worker) { wk.lastPark = spinAfterPark }, false},
		{"another spinner in the pool", func(p *pool, wk *worker) { p.nrSpinning = 1 }, false},
		{"dying", func(p *pool, wk *worker) { wk.dying = true }, false},
		{"rescuer", func(p *pool, wk *worker) { wk.rescuer = &rescuer{} }, false},
		{"process-wide cap", func(p *pool, wk *worker) { spinners.Add(int32(max(1, runtime.GOMAXPROCS(0)/2))) }, false},
	}
	for _, c := range cases {
		p, wk := mk()
		n0 := spinners.Load()
		c.edit(p, wk)
		if got := p.spinOK(wk); got != c.want {
			t.Errorf("%s: spinOK = %v, want %v", c.name, got, c.want)
		}
		spinners.Store(n0)
	}
}

// TestKickWithSpinner: with a worker spinning, a kick that finds work
// wakes nobody and bumps the kick generation the spinner watches; with
// none, it picks the idle worker to wake at unlock.
func TestKickWithSpinner(t *testing.T) {
	p := &pool{key: poolKey{cpu: -1}, mayspin: true, cpus: []int{0, 1}}
	p.mu.Lock() // a bare pool, never unlocked: the policy functions assert the lock (wqdebug)
	idle := &worker{pool: p}
	p.idle = []*worker{idle}
	p.worklist.pushBack(NewWork(func() {}))
	p.nrSpinning = 1
	g0 := p.kickGen.Load()
	p.kick()
	if p.mu.wake != nil {
		t.Errorf("kick chose a worker to wake while one spins")
	}
	if p.kickGen.Load() == g0 {
		t.Errorf("kick did not bump the generation the spinner watches")
	}
	p.nrSpinning = 0
	p.kick()
	if p.mu.wake != idle {
		t.Errorf("kick with no spinner chose %v, want the idle worker", p.mu.wake)
	}
	// Concurrency management: an unbound pool of two CPUs wants no third
	// running worker.
	p.mu.wake = nil
	p.nrRunning = 2
	p.kick()
	if p.mu.wake != nil {
		t.Errorf("kick woke a worker with as many running as the pool has CPUs")
	}
	// Once a worker was seen blocked, the unbound pool runs every pending
	// item at once, as the kernel's unbound pools do.
	p.blocking, p.blockedAt = true, nanotime()
	p.kick()
	if p.mu.wake != idle {
		t.Errorf("kick of a blocking unbound pool did not wake the idle worker")
	}
}

// TestPoolMutexWaits: a Lock that finds the pool lock held is counted, in
// both kinds of pool lock.
func TestPoolMutexWaits(t *testing.T) {
	for _, pi := range []bool{false, true} {
		var pm poolMutex
		pm.pi = pi
		pm.Lock()
		done := make(chan struct{})
		go func() {
			pm.Lock()
			pm.Unlock()
			close(done)
		}()
		for pm.Waits() == 0 {
			runtime.Gosched()
		}
		pm.Unlock()
		<-done
		if w := pm.Waits(); w != 1 {
			t.Errorf("pi=%v: Waits = %d, want 1", pi, w)
		}
	}
}

// TestWakeHint: an unbound pool wakes, among its four most recent idle
// workers, one that parked on the queuer's CPU; otherwise (and in per-CPU
// pools) the most recent one.
func TestWakeHint(t *testing.T) {
	mk := func(cpu int, parked ...int) *pool {
		p := &pool{key: poolKey{cpu: cpu}, lastQueueCPU: 1}
		p.mu.Lock() // a bare pool, never unlocked: the policy functions assert the lock (wqdebug)
		for _, c := range parked {
			p.idle = append(p.idle, &worker{parkCPU: c})
		}
		return p
	}
	cases := []struct {
		p    *pool
		want int
	}{
		{mk(-1, 0, 0, 1, 0), 2},    // the one that parked on CPU 1
		{mk(-1, 1, 0, 0, 0, 0), 4}, // on CPU 1 but not among the 4 most recent
		{mk(-1, 0, 0), 1},          // none on CPU 1: most recent
		{mk(0, 1, 0), 1},           // per-CPU pool: most recent
	}
	for i, c := range cases {
		if got := c.p.wakeHint(); got != c.want {
			t.Errorf("case %d: wakeHint = %d, want %d", i, got, c.want)
		}
	}
}

// A pool whose workers kept the inherited nice (unprivileged under
// nice -n 19) shows that nice in Pools(), with the class's as AskedNice.
// Catches: Pools() reporting the class's nice 0 while the threads run at 19.
func TestPoolsShowKeptInheritedNice(t *testing.T) {
	q, err := Alloc("keptnice", Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	id := q.PoolIDs()[0]
	var p *pool
	poolRegistry.mu.Lock()
	for _, pp := range poolRegistry.m {
		if pp.id == id {
			p = pp
		}
	}
	poolRegistry.mu.Unlock()
	if p == nil {
		t.Fatalf("pool %d of the queue not registered", id)
	}
	if p.key.class.nice != 0 {
		t.Skipf("the default unbound pool has nice %d here, not the normal class's 0", p.key.class.nice)
	}
	if !p.keptNiceSet.Load() {
		// Simulate what setup records when the process may not lower its
		// nice; undo it so that other tests see the pool as it was.
		defer func() {
			p.mu.Lock()
			p.classErr = nil
			p.mu.Unlock()
			p.classErrMsg.Store(nil)
			p.keptNiceSet.Store(false)
		}()
		p.keepInheritedNice(19, errors.New("simulated: operation not permitted"))
	}
	for _, pi := range Pools() {
		if pi.ID != id {
			continue
		}
		if pi.Nice != 19 || pi.AskedNice != 0 {
			t.Fatalf("pool %d: Nice %d AskedNice %d, want 19 (the kept inherited nice) and 0", id, pi.Nice, pi.AskedNice)
		}
		return
	}
	t.Fatalf("pool %d not in Pools()", id)
}
