package timer

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// waitFor polls cond for up to 10 s (a bound for a hung test, not a
// timing goal).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// backends runs f on the Go backend and on an RT base.
func backends(t *testing.T, f func(t *testing.T, rt *RT)) {
	t.Run("go", func(t *testing.T) { f(t, nil) })
	t.Run("rt", func(t *testing.T) {
		set := AcquireRT(1)
		defer set.Release()
		f(t, set.On(-1))
	})
}

func TestFiresOncePerArming(t *testing.T) {
	backends(t, func(t *testing.T, rt *RT) {
		var n atomic.Int32
		var tm Timer
		tm.Init(func() { n.Add(1) })
		for i := 1; i <= 3; i++ {
			tm.Reset(time.Millisecond, rt)
			waitFor(t, "the timer to fire", func() bool { return n.Load() == int32(i) })
			if tm.Stop() {
				t.Fatalf("Stop after the function ran returned true")
			}
		}
		time.Sleep(5 * time.Millisecond)
		if got := n.Load(); got != 3 {
			t.Fatalf("fired %d times for 3 armings", got)
		}
	})
}

func TestStopPreventsCall(t *testing.T) {
	backends(t, func(t *testing.T, rt *RT) {
		var n atomic.Int32
		var tm Timer
		tm.Init(func() { n.Add(1) })
		tm.Reset(time.Hour, rt)
		if !tm.Stop() {
			t.Fatal("Stop of an armed timer returned false")
		}
		if tm.Stop() {
			t.Fatal("second Stop returned true")
		}
		// Re-arm short and stop it again: the earlier, stopped arming
		// must not leave a call behind.
		tm.Reset(0, rt)
		waitFor(t, "the re-armed timer to fire", func() bool { return n.Load() == 1 })
		time.Sleep(2 * time.Millisecond)
		if got := n.Load(); got != 1 {
			t.Fatalf("fired %d times, want 1", got)
		}
	})
}

// TestNotEarly: a function never runs before its deadline, on either
// backend (a correctness bound, not a latency goal).
func TestNotEarly(t *testing.T) {
	backends(t, func(t *testing.T, rt *RT) {
		const d = 3 * time.Millisecond
		var ran atomic.Int64
		var tm Timer
		tm.Init(func() { ran.Store(sched.MonotonicNs()) })
		start := sched.MonotonicNs()
		tm.Reset(d, rt)
		waitFor(t, "the timer to fire", func() bool { return ran.Load() != 0 })
		if got := time.Duration(ran.Load() - start); got < d {
			t.Fatalf("fired after %v, before its %v delay", got, d)
		}
	})
}

// TestHeapOrder arms many timers in shuffled order on one RT base, stops
// some, and checks that the rest fire in deadline order, each once.
func TestHeapOrder(t *testing.T) {
	set := AcquireRT(1)
	defer set.Release()
	rt := set.On(-1)
	const n = 64
	var mu sync.Mutex
	var order []int
	ts := make([]Timer, n)
	for i := range ts {
		ts[i].Init(func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	// Deadlines 20 ms + i*200 us, armed in a scrambled order: the heap,
	// not arming order, decides.
	base := sched.MonoNow() + int64(20*time.Millisecond)
	for k := range n {
		i := (k * 37) % n
		rt.add(&ts[i], base+int64(i)*int64(200*time.Microsecond))
	}
	stopped := map[int]bool{}
	for i := 0; i < n; i += 5 {
		if !ts[i].stopRT(rt) {
			t.Fatalf("Stop of armed timer %d returned false", i)
		}
		stopped[i] = true
	}
	want := n - len(stopped)
	waitFor(t, "every timer to fire", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) >= want })
	time.Sleep(2 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(order) != want {
		t.Fatalf("%d calls, want %d: %v", len(order), want, order)
	}
	for k, i := range order {
		if stopped[i] {
			t.Fatalf("stopped timer %d fired", i)
		}
		if k > 0 && i < order[k-1] {
			t.Fatalf("out of deadline order: %v", order)
		}
	}
}

// stopRT is Stop for a timer armed with add directly.
func (t *Timer) stopRT(rt *RT) bool { t.rt = rt; return t.Stop() }

// TestEarlierDeadlineWakes: a timer armed while the thread sleeps for a
// later one is not held back until that later deadline.
func TestEarlierDeadlineWakes(t *testing.T) {
	set := AcquireRT(1)
	defer set.Release()
	rt := set.On(-1)
	var late, early Timer
	var lateRan, earlyRan atomic.Bool
	late.Init(func() { lateRan.Store(true) })
	early.Init(func() { earlyRan.Store(true) })
	late.Reset(time.Hour, rt)
	waitFor(t, "the thread to sleep for the 1 h timer", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.sleepUntil == late.when
	})
	early.Reset(time.Millisecond, rt)
	waitFor(t, "the earlier timer to fire", earlyRan.Load)
	if lateRan.Load() {
		t.Fatal("the 1 h timer fired")
	}
	if !late.Stop() {
		t.Fatal("the 1 h timer was not armed any more")
	}
	if _, w := rt.Stats(); w == 0 {
		t.Fatal("arming the earlier deadline issued no wake-up")
	}
}

// TestGoexitContained: a function that calls runtime.Goexit on the RT
// thread ends that thread only; a new one serves the heap.
func TestGoexitContained(t *testing.T) {
	set := AcquireRT(1)
	defer set.Release()
	rt := set.On(-1)
	waitFor(t, "the thread to start", func() bool { return rt.TID() != 0 })
	first := rt.TID()
	var a, b Timer
	var bRan atomic.Bool
	a.Init(func() { runtime.Goexit() })
	b.Init(func() { bRan.Store(true) })
	a.Reset(0, rt)
	b.Reset(2*time.Millisecond, rt)
	waitFor(t, "the timer after the Goexit to fire", bRan.Load)
	if tid := rt.TID(); tid == first || tid == 0 {
		t.Fatalf("thread after Goexit: tid %d (first %d)", tid, first)
	}
}

// TestThreadLifetime: a set starts a thread per CPU asked for, pinned
// there when the process may run there, at the set's class when
// permitted; the threads exit with the last reference (goleak checks the
// goroutines at the end); a new reference makes a new set.
func TestThreadLifetime(t *testing.T) {
	cpus, err := sched.Affinity(0)
	if err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	a := AcquireRT(1)
	b := AcquireRT(1)
	if a != b {
		t.Fatal("two sets for one priority")
	}
	if len(a.Bases()) != 0 {
		t.Fatal("a thread started before On")
	}
	for _, cpu := range cpus {
		base := a.On(cpu)
		if a.On(cpu) != base || base.CPU() != cpu {
			t.Fatalf("On(%d) is not one base for CPU %d", cpu, cpu)
		}
		waitFor(t, "the thread's setup", base.Ready)
		tid := base.TID()
		if n, _ := sched.ThreadName(tid); n != fmt.Sprintf("ktimers/%d:F1", cpu) {
			t.Fatalf("thread of CPU %d named %q", cpu, n)
		}
		if got, err := sched.Affinity(tid); err != nil || len(got) != 1 || got[0] != cpu {
			t.Fatalf("thread of CPU %d: affinity %v (%v)", cpu, got, err)
		}
		if base.ClassErr() == "" {
			attr, err := sched.GetAttr(tid)
			if err != nil {
				t.Fatal(err)
			}
			if attr.Policy != sched.PolicyFIFO || attr.Priority != 1 {
				t.Fatalf("thread class %+v, want SCHED_FIFO 1", attr)
			}
		}
	}
	if got := len(a.Bases()); got != len(cpus) {
		t.Fatalf("%d bases for %d CPUs", got, len(cpus))
	}
	// One P reserved for the whole set, however many CPUs it serves.
	waitFor(t, "the set's P reservation", func() bool { return runtime.GOMAXPROCS(0) == procs+1 })
	a.Release()
	for _, base := range a.Bases() {
		if base.TID() == 0 {
			t.Fatal("a thread exited with a reference left")
		}
	}
	b.Release()
	for _, base := range a.Bases() {
		if base.TID() != 0 {
			t.Fatal("a thread still runs after the last Release returned")
		}
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Fatalf("GOMAXPROCS %d after the last Release, want %d", got, procs)
	}
	c := AcquireRT(1)
	defer c.Release()
	if c == a {
		t.Fatal("a released set was reused")
	}
}

// TestNoAllocPerArm: arming and stopping on an RT base whose heap has
// grown does not allocate.
func TestNoAllocPerArm(t *testing.T) {
	set := AcquireRT(1)
	defer set.Release()
	rt := set.On(-1)
	var tm Timer
	tm.Init(func() {})
	tm.Reset(time.Hour, rt)
	tm.Stop()
	if n := testing.AllocsPerRun(100, func() {
		tm.Reset(time.Hour, rt)
		tm.Stop()
	}); n != 0 {
		t.Fatalf("%v allocations per arm+stop", n)
	}
}

// BenchmarkArmStop: the cost of arming a 1 h timer and stopping it, on
// each backend (the RT one after its thread sleeps with a deadline, so
// the arming issues no wake-up).
func BenchmarkArmStop(b *testing.B) {
	for _, name := range []string{"go", "rt"} {
		b.Run(name, func(b *testing.B) {
			var rt *RT
			if name == "rt" {
				set := AcquireRT(1)
				defer set.Release()
				rt = set.On(-1)
				var keep Timer
				keep.Init(func() {})
				keep.Reset(time.Minute, rt) // the thread sleeps for this one
				defer keep.Stop()
			}
			var tm Timer
			tm.Init(func() {})
			b.ReportAllocs()
			for b.Loop() {
				tm.Reset(time.Hour, rt)
				tm.Stop()
			}
		})
	}
}

// TestReinitKeepsFunction: a second Init leaves the function alone, so a
// late call of an earlier arming never races with it.
func TestReinitKeepsFunction(t *testing.T) {
	backends(t, func(t *testing.T, rt *RT) {
		var first, second atomic.Int32
		var tm Timer
		tm.Init(func() { first.Add(1) })
		tm.Init(func() { second.Add(1) })
		tm.Reset(0, rt)
		waitFor(t, "the timer to fire", func() bool { return first.Load()+second.Load() > 0 })
		if second.Load() != 0 {
			t.Fatal("the second Init replaced the function")
		}
	})
}
