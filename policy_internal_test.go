package wq

import (
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
