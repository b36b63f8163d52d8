package wq

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"golang.org/x/sys/unix"
)

// Slots for goroutine items (goadmit.go).

// reserveForTest reserves n Ps as an RT pool would (no privilege needed)
// and gives them back at the end of the test.
func reserveForTest(t *testing.T, n int) {
	t.Helper()
	sched.ReserveP(n)
	t.Cleanup(func() { sched.ReserveP(-n) })
}

// goDefaultQueue allocates a goroutine-backed default queue, or skips.
func goDefaultQueue(t *testing.T, name string, maxActive int) *Workqueue {
	t.Helper()
	q, err := Alloc(name, Unbound, maxActive)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	if !q.GoroutineBacked() {
		t.Skip("the default queue is not goroutine-backed here (GOWQ_THREADS, or a niced process)")
	}
	return q
}

// TestGoroutineItemsLeaveReservedPs: while a P is reserved for RT, CPU-bound
// items of a default queue never run more than GOMAXPROCS less the
// reserved Ps at once (items started and not ended), so that a woken RT
// thread finds its P idle. Without the slots, every queued item starts on
// its own goroutine worker at once.
func TestGoroutineItemsLeaveReservedPs(t *testing.T) {
	reserveForTest(t, 1)
	q := goDefaultQueue(t, "slots-rt", 64)
	bound := runtime.GOMAXPROCS(0) - sched.ReservedPs()
	var attempt func() (peak int, clean bool)
	attempt = func() (int, bool) {
		_, _, lifts0, forced0, _, _ := goSlotCounts()
		var in, peak atomic.Int32
		for range 200 {
			q.Go(func() {
				n := in.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				// 300 us of CPU: a short CPU-bound item.
				for end := time.Now().Add(300 * time.Microsecond); time.Now().Before(end); {
				}
				in.Add(-1)
			})
		}
		q.Flush()
		_, _, lifts, forced, _, _ := goSlotCounts()
		// A lift (a P seen unused twice: the machine's other load can
		// deschedule a whole process) or a forced admission lets items
		// past the bound by design: such an attempt proves nothing.
		return int(peak.Load()), lifts == lifts0 && forced == forced0
	}
	for i := 0; ; i++ {
		peak, clean := attempt()
		if peak > bound && clean {
			t.Fatalf("%d CPU-bound items ran at once with GOMAXPROCS %d and %d P(s) reserved for RT (bound %d)",
				peak, runtime.GOMAXPROCS(0), sched.ReservedPs(), bound)
		}
		if clean {
			t.Logf("peak %d items at once, bound %d", peak, bound)
			return
		}
		if i == 4 {
			t.Skipf("every attempt saw a lift or a forced admission (the machine is too loaded to tell)")
		}
	}
}

// TestGoroutineItemsBlockedDoNotHoldReservedRoom: items blocked in Go
// (here each waits for all the others) hold a slot but no P; the bound is
// lifted when a P is seen unused, so that 300 such items all start
// quickly. With the slots alone (no lift) they would start one per
// forced admission, 10 ms each: 3 s.
func TestGoroutineItemsBlockedDoNotHoldReservedRoom(t *testing.T) {
	reserveForTest(t, 1)
	const n = 300
	q := goDefaultQueue(t, "slots-blocked", n)
	var started sync.WaitGroup
	started.Add(n)
	all := make(chan struct{})
	t0 := time.Now()
	for range n {
		q.Go(func() {
			started.Done()
			<-all
		})
	}
	testutil.MustReturn(t, "every blocked item started", started.Wait)
	took := time.Since(t0)
	close(all)
	q.Flush()
	_, _, lifts, forced, _, _ := goSlotCounts()
	t.Logf("%d blocked items started in %v (lifts %d, forced admissions %d)", n, took, lifts, forced)
	if took > 1500*time.Millisecond {
		t.Fatalf("%d items blocked in Go took %v to start: blocked items keep the room of the reserved Ps", n, took)
	}
}

// TestGoSlotsReturnedOnEveryExit: a slot is given back whichever way the
// item ends: returning, panicking, runtime.Goexit in the work function,
// and at Destroy. A slot kept by a dead worker would shrink the bound for
// good (and at the bound, starve every default queue).
func TestGoSlotsReturnedOnEveryExit(t *testing.T) {
	reserveForTest(t, 1)
	SetErrorHandler(func(string, string, error) {})
	defer SetErrorHandler(nil)
	q, err := Alloc("slots-exit", Unbound, 8, WithPanicHandler(func(PanicInfo) {}))
	if err != nil {
		t.Fatal(err)
	}
	if !q.GoroutineBacked() {
		q.Destroy()
		t.Skip("the default queue is not goroutine-backed here")
	}
	settled := func(what string) {
		testutil.WaitFor(t, what+": every slot given back", func() bool {
			in, _, _, _, _, _ := goSlotCounts()
			return in == 0
		})
	}
	bound := runtime.GOMAXPROCS(0) - sched.ReservedPs()
	for round := range 2 * bound {
		done := make(chan struct{})
		q.Go(func() { defer close(done); panic("boom") })
		<-done
		q.Flush()
		settled("panic")
		done = make(chan struct{})
		q.Go(func() { defer close(done); runtime.Goexit() })
		<-done
		q.Flush()
		settled("runtime.Goexit")
		_ = round
	}
	// Every slot a leak would have taken is still free: bound items
	// blocked on a channel start at once (no lift needed: nothing else
	// holds a slot).
	var started sync.WaitGroup
	started.Add(bound)
	release := make(chan struct{})
	for range bound {
		q.Go(func() { started.Done(); <-release })
	}
	testutil.MustReturn(t, "bound items start", started.Wait)
	close(release)
	q.Destroy()
	settled("Destroy")
}

// TestMemReclaimRescuedAtThreadCap: at the thread bound (the gate leaves
// no headroom and every slot is held by an item blocked in a system
// call), a MemReclaim default queue's item is run by its rescuer, whose
// thread exists already.
func TestMemReclaimRescuedAtThreadCap(t *testing.T) {
	q := goDefaultQueue(t, "slots-blockers", 64)
	mr, err := Alloc("slots-reclaim", Unbound|MemReclaim, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Destroy()
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		return sched.GateMargin(), sched.ThreadLimit{Name: "test", Max: 100, Current: 100 - sched.GateMargin()}, nil
	})
	defer restore()
	goThreadsReread()
	defer goThreadsReread()
	// Items blocked in read(2) on a blocking pipe: each holds a thread.
	const nBlock = 4
	var blocked atomic.Int32
	for range nBlock {
		q.Go(func() {
			blocked.Add(1)
			var b [1]byte
			_, _ = unix.Read(fds[0], b[:])
			blocked.Add(-1)
		})
	}
	testutil.WaitFor(t, "a blocker in its system call", func() bool { return blocked.Load() > 0 })
	ran := make(chan struct{})
	mr.Queue(NewWork(func() { close(ran) }))
	select {
	case <-ran:
	case <-time.After(testutil.Timeout):
		t.Fatalf("the MemReclaim item did not run at the thread bound: %+v", mr.Stats())
	}
	if st := mr.Stats(); st.Rescued == 0 {
		t.Logf("the item ran without its rescuer (%d blockers in their system call): %+v", blocked.Load(), st)
		if blocked.Load() == nBlock {
			t.Fatalf("every slot was held by a blocked item, yet the item ran without the rescuer")
		}
	}
	_, _ = unix.Write(fds[1], make([]byte, nBlock))
	q.Flush()
}

// TestLongRTPWaitIsLoggedOnce: the first RT worker wake-up that waits over
// a millisecond for a Go P is logged once, with the cause and the fix;
// shorter waits and other classes are not.
func TestLongRTPWaitIsLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	SetLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil)))
	defer SetLogger(nil)
	rtPWaitWarned.Store(false)
	defer rtPWaitWarned.Store(false)
	mk := func(c classAttrs) *pwq {
		return &pwq{pool: &pool{key: poolKey{cpu: -1, class: c}}, wq: &Workqueue{name: "pw"}}
	}
	rt := mk(classAttrs{policy: sched.PolicyFIFO, prio: 50})
	normal := mk(classAttrs{})
	charge := func(pq *pwq, d time.Duration) {
		wk := &worker{pwait: int64(d), pwaitSet: true}
		wk.chargePWait(pq)
	}
	charge(normal, 5*time.Millisecond)
	charge(rt, 500*time.Microsecond)
	charge(rt, 3*time.Millisecond)
	charge(rt, 4*time.Millisecond)
	testutil.WaitFor(t, "the warning", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(buf.String(), "waited for a Go P")
	})
	time.Sleep(50 * time.Millisecond) // a second one would be logged by now
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if n := strings.Count(out, "waited for a Go P"); n != 1 || !strings.Contains(out, "pwait=3ms") || !strings.Contains(out, "GOMAXPROCS") {
		t.Fatalf("want one warning for the 3 ms wait naming the cause, got %d:\n%s", n, out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// goThreadsReread makes the next slot read the thread limits (tests).
func goThreadsReread() {
	a := &goAdm
	a.mu.Lock()
	a.thrRead = false
	a.setLimitLocked(nanotime())
	a.mu.Unlock()
}

// BenchmarkRingDefaultBesideRT: BenchmarkRingUnbound's default queue with
// a P reserved as by an RT pool (the slots bind), with none, and with the
// slots switched off beside the reservation.
func BenchmarkRingDefaultBesideRT(b *testing.B) {
	for _, tc := range []struct {
		name     string
		reserved int
		off      bool
	}{{"reserved", 1, false}, {"none", 0, false}, {"reserved-slots-off", 1, true}} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.reserved > 0 {
				sched.ReserveP(tc.reserved)
				defer sched.ReserveP(-tc.reserved)
			}
			if tc.off {
				setGoSlotsOff(true)
				defer setGoSlotsOff(false)
			}
			q, err := Alloc("bench-ring-rt", Unbound, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Destroy()
			var n atomic.Int64
			ring := make([]*Work, 64)
			for i := range ring {
				ring[i] = NewWork(func() { n.Add(1) })
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i, queued := 0, 0; queued < b.N; i++ {
				if q.Queue(ring[i%len(ring)]) {
					queued++
				} else {
					runtime.Gosched()
				}
			}
			q.Flush()
		})
	}
}
