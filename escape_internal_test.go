package wq

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gowq/wq/internal/topology"
)

// escapeTarget prefers the SMT siblings, then the cache pod, then the
// node, then any CPU, and never returns the stalled CPU.
func TestEscapeTargetPreference(t *testing.T) {
	core := func(c int) int { return c / 2 }
	llc4 := func(c int) int { return c / 4 }
	node4 := func(c int) int { return c / 4 }
	set := topology.NewCPUSet
	without := func(s topology.CPUSet, cpus ...int) topology.CPUSet { return s.AndNot(set(cpus...)) }
	all := set(0, 1, 2, 3, 4, 5, 6, 7)
	for _, c := range []struct {
		name   string
		topo   *topology.Topology
		cpu    int
		expect []int
	}{
		{"smt sibling", topology.NewStatic(all, core, llc4, node4), 0, []int{1}},
		{"cache pod when the sibling is offline", topology.NewStatic(without(all, 1), core, llc4, node4), 0, []int{2, 3}},
		{"node when the cache pod is the core", topology.NewStatic(without(all, 1), core, core, node4), 0, []int{2, 3}},
		{"anywhere when the node has no other CPU", topology.NewStatic(set(0, 4, 5, 6, 7), core, llc4, node4), 0, []int{4, 5, 6, 7}},
		{"offline stalled CPU: every online CPU", topology.NewStatic(set(4, 5), core, llc4, node4), 0, []int{4, 5}},
		{"one CPU: nowhere", topology.NewStatic(set(3), core, llc4, node4), 3, nil},
	} {
		got := escapeTarget(c.topo, c.cpu).List()
		if !slices.Equal(got, c.expect) {
			t.Errorf("%s: escapeTarget(%d) = %v, want %v", c.name, c.cpu, got, c.expect)
		}
		if slices.Contains(got, c.cpu) {
			t.Errorf("%s: target %v holds the stalled CPU %d", c.name, got, c.cpu)
		}
	}
}

// escMin must end as the shortest escape_after of the live queues after
// concurrent SetEscapeAfter calls on different queues: each call
// recomputed it from the queues and stored the result, so a call that
// read the queues first could store last (a lost update) and leave escMin
// 0 or too long while an escape queue is live (the monitor then sleeps
// past its items).
func TestEscMinIsShortestAfterConcurrentSets(t *testing.T) {
	q1, err := Alloc("rev3-min1", PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Destroy()
	q2, err := Alloc("rev3-min2", PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Destroy()
	defer func() { _ = q1.SetEscapeAfter(0); _ = q2.SetEscapeAfter(0) }()
	for i := range 50000 {
		var wg sync.WaitGroup
		d1 := time.Duration(i%2) * 50 * time.Microsecond // 0 or 50us
		d2 := time.Duration(1-i%2) * 70 * time.Microsecond
		wg.Add(2)
		go func() { defer wg.Done(); _ = q1.SetEscapeAfter(d1) }()
		go func() { defer wg.Done(); _ = q2.SetEscapeAfter(d2) }()
		wg.Wait()
		want := int64(max(d1, d2)) // one of them is 0
		if got := escMin.Load(); got != want {
			t.Fatalf("round %d: escMin %v after SetEscapeAfter(%v) and (%v) on two queues, want %v",
				i, time.Duration(got), d1, d2, time.Duration(want))
		}
	}
}

// While escape queues are hot (a pool was marked within escHold) the
// monitor samples at escape_after, also when pools are busy and its
// interval has backed off to cmTick (1 ms): it then slept the whole tick,
// neither polling at escape_after nor wakeable, so items activated
// meanwhile escaped up to a tick late (the stalled CPU's hog keeps its pool
// busy: the common case).
func TestMonitorSamplesAtEscapeAfterWhileBusy(t *testing.T) {
	ea := 100 * time.Microsecond
	tick := time.Millisecond
	for _, interval := range []time.Duration{cmFastPoll, 200 * time.Microsecond, 500 * time.Microsecond, tick} {
		sleep, wakeable := cmSleep(interval, tick, ea, false, true, 0, 0)
		if wakeable {
			t.Errorf("interval %v, hot: wakeable (nothing would wake it)", interval)
		}
		if want := min(interval, ea); sleep != want {
			t.Errorf("interval %v, escape_after %v, hot, no pool marked: sleep %v, want %v", interval, ea, sleep, want)
		}
	}
	// Quiet: the full interval, wakeable.
	if sleep, wakeable := cmSleep(tick, tick, ea, false, false, 0, 0); sleep != tick || !wakeable {
		t.Errorf("quiet: sleep %v wakeable %v, want %v true", sleep, wakeable, tick)
	}
	// A marked pool: until its earliest deadline.
	if sleep, _ := cmSleep(tick, tick, ea, true, true, 300_000, 0); sleep != 300*time.Microsecond {
		t.Errorf("marked, due in 300us: sleep %v", sleep)
	}
}
