package wq

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gowq/wq/internal/sched"
)

// fakeGate makes the thread gate read the headroom set by the returned
// function and counts the readings.
func fakeGate(t *testing.T) (set func(n int, lim sched.ThreadLimit), reads *atomic.Int64) {
	t.Helper()
	var cur atomic.Pointer[struct {
		n   int
		lim sched.ThreadLimit
	}]
	reads = new(atomic.Int64)
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		reads.Add(1)
		c := cur.Load()
		return c.n, c.lim, nil
	})
	t.Cleanup(restore)
	set = func(n int, lim sched.ThreadLimit) {
		cur.Store(&struct {
			n   int
			lim sched.ThreadLimit
		}{n, lim})
	}
	set(1<<20, sched.ThreadLimit{})
	return set, reads
}

// TestThreadGateMargin: at GateMargin threads of headroom or less a
// creation is refused with ErrThreadLimit naming the limit and its fix;
// one more thread of headroom allows it. Catches a gate that lets the
// process come within the runtime's margin.
func TestThreadGateMargin(t *testing.T) {
	set, _ := fakeGate(t)
	m := sched.GateMargin()
	pids := sched.ThreadLimit{Name: "pids.max", Path: "/sys/fs/cgroup/pids/job", Max: 30, Current: 30 - m}
	nproc := sched.ThreadLimit{Name: "RLIMIT_NPROC", Max: 40, Current: 45}
	for _, c := range []struct {
		n    int
		lim  sched.ThreadLimit
		want []string // in the error; nil: no error
	}{
		{m + 1, pids, nil},
		{m + 100, pids, nil},
		{m, pids, []string{"pids.max 30", "/sys/fs/cgroup/pids/job", "raise it", "pids.max"}},
		{0, pids, []string{"pids.max 30", "leaves 0 more"}},
		{-5, nproc, []string{"RLIMIT_NPROC 40", "ulimit -u", "leaves 0 more"}},
		{1, sched.ThreadLimit{Name: "kernel.pid_max", Max: 100, Current: 99}, []string{"kernel.pid_max", "sysctl"}},
	} {
		set(c.n, c.lim)
		err := checkThreadHeadroom()
		if c.want == nil {
			if err != nil {
				t.Errorf("headroom %d: %v, want nil", c.n, err)
			}
			continue
		}
		if !errors.Is(err, ErrThreadLimit) {
			t.Errorf("headroom %d (%s): %v, want ErrThreadLimit", c.n, c.lim.Name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("headroom %d: error %q lacks %q", c.n, err, w)
			}
		}
	}
}

// TestThreadGateReadsEveryCreation: a limit tightened right after a
// reading that left plenty of room is seen by the very next creation.
// Catches a headroom cache trusted for a while after a reading (the
// process then aborts in pthread_create).
func TestThreadGateReadsEveryCreation(t *testing.T) {
	set, reads := fakeGate(t)
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/x", Max: 100000, Current: 0}
	set(100000, lim)
	for range 10 {
		if err := checkThreadHeadroom(); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.Load(); n != 10 {
		t.Errorf("%d readings for 10 checks, want 10", n)
	}
	// docker update --pids-limit: the limit drops to just above use.
	set(sched.GateMargin(), sched.ThreadLimit{Name: "pids.max", Path: "/x", Max: 20, Current: 20 - sched.GateMargin()})
	if err := checkThreadHeadroom(); !errors.Is(err, ErrThreadLimit) {
		t.Fatalf("check right after the limit was tightened: %v, want ErrThreadLimit", err)
	}
	var ran atomic.Bool
	if err := goLocked(func() { ran.Store(true) }); !errors.Is(err, ErrThreadLimit) {
		t.Fatalf("goLocked right after the limit was tightened: %v, want ErrThreadLimit", err)
	}
	set(100000, lim) // threads exited: the refusal is not remembered
	if err := checkThreadHeadroom(); err != nil {
		t.Errorf("after threads exited: %v", err)
	}
	if ran.Load() {
		t.Error("a refused goLocked ran its function")
	}
}

// TestThreadGateCountsStarting: creations allowed whose thread does not
// exist yet count against the headroom. Catches a burst of creations that
// all pass on readings taken before their threads existed (the kernel's
// count lags the gate).
func TestThreadGateCountsStarting(t *testing.T) {
	m := sched.GateMargin()
	var live atomic.Int64 // threads that exist: what the kernel counts
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		n := m + 3 - int(live.Load())
		return n, sched.ThreadLimit{Name: "pids.max", Path: "/x", Max: 100, Current: 100 - n}, nil
	})
	defer restore()
	// One P: the new goroutines cannot run (and their threads are not
	// counted) until this goroutine blocks.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	hold := make(chan struct{})
	started := make(chan struct{}, 8)
	allowed := 0
	for range 8 {
		if err := sched.GoLocked(func() { live.Add(1); started <- struct{}{}; <-hold }); err != nil {
			break
		}
		allowed++
	}
	for range allowed {
		<-started
	}
	close(hold)
	if allowed != 3 {
		t.Errorf("the gate allowed %d creations where the limit left room for 3", allowed)
	}
}
