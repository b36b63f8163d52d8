package wq

import (
	"bytes"
	"log/slog"
	"math"
	"runtime"
	"runtime/metrics"
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

// itemThreads returns a gate reader that leaves goroutine items k
// threads in all: the limit's headroom is the margin less what
// goThreadCap would give the items with no headroom, plus k.
func itemThreads(k int) func() (int, sched.ThreadLimit, error) {
	return func() (int, sched.ThreadLimit, error) {
		s := []metrics.Sample{
			goSampleThreads: {Name: "/sched/threads/total:threads"},
			goSampleNotInGo: {Name: "/sched/goroutines/not-in-go:goroutines"},
		}
		metrics.Read(s)
		n := sched.GateMargin() - int(goThreadCap(0, int64(goAdm.inflight.Load()), s)) + k
		return n, sched.ThreadLimit{Name: "test", Max: 1000, Current: 1000 - n}, nil
	}
}

// TestMemReclaimRescuedAtThreadCap: at the thread bound (the gate and the
// runtime's idle threads leave the items 4 threads, and every slot is held by an item blocked in a system
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
	const nBlock = 4
	restore := sched.SetGateReader(itemThreads(nBlock))
	defer restore()
	goThreadsReread()
	defer goThreadsReread()
	// Items blocked in read(2) on a blocking pipe: each holds a thread.
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

// TestGoSlotForcedAfterGiveBackWithoutGrant: a waiter is admitted anyway
// once the line has not moved for goForceAfter, even if a slot was given
// back meanwhile that could not be granted (the giver was over the bound
// after a forced admission). Items that hold every slot and spin until an
// item queued behind them has run must not wait for it forever.
//
// The giver: B0's worker, admitted by force, runs B0 (2 ms) and then B;
// B0's kick starts the worker that waits for Y. When B ends, its worker
// has held its slot over goSlotKeep while someone waits: it gives the slot
// back (inflight is still at the bound, so no one is granted) and parks.
func TestGoSlotForcedAfterGiveBackWithoutGrant(t *testing.T) {
	reserveForTest(t, 1)
	q := goDefaultQueue(t, "slots-force", 64)
	bound := runtime.GOMAXPROCS(0) - sched.ReservedPs()
	for attempt := 0; ; attempt++ {
		var stop, spinning atomic.Int32
		var bStarted atomic.Bool
		yRan := make(chan struct{})
		bch := make(chan struct{})
		for range bound {
			q.Go(func() {
				spinning.Add(1)
				for stop.Load() == 0 {
				}
			})
		}
		testutil.WaitFor(t, "the spinners hold every slot", func() bool { return int(spinning.Load()) == bound })
		_, _, _, forced0, _, _ := goSlotCounts()
		q.Go(func() { time.Sleep(2 * time.Millisecond) })
		q.Go(func() { bStarted.Store(true); <-bch })
		q.Go(func() { close(yRan); stop.Store(1) })
		// B runs (its worker was admitted by force) and Y's worker waits.
		testutil.WaitFor(t, "B started and Y's worker waiting", func() bool {
			_, waiting, _, _, _, _ := goSlotCounts()
			return bStarted.Load() && waiting > 0
		})
		_, _, _, forced1, _, _ := goSlotCounts()
		close(bch)
		select {
		case <-yRan:
		case <-time.After(3 * time.Second):
			stop.Store(1)
			q.Flush()
			t.Fatalf("Y's worker was never admitted: every slot is held by items that wait for Y, and a slot given back (not granted: over the bound) stopped the forced admission")
		}
		q.Flush()
		if forced1-forced0 == 1 {
			return // B's worker was forced, Y's waited after B's give-back: conclusive
		}
		// Y's worker was forced before B ended (the machine is slow), or
		// a lift let B0 in: no give-back happened while it waited.
		if attempt >= 20 {
			t.Skipf("no attempt reached the give-back with a waiter (forced %d before B ended)", forced1-forced0)
		}
	}
}

// TestThreadLimitsReadAgainAtBurstOnIdleWorkers: a thread limit set after
// a reading that found none is read at the next burst of a default queue
// once the reading is over goThreadsReadEvery old, also when the burst is
// served by idle workers (no worker starts), as a service that saw a
// larger burst before has them.
func TestThreadLimitsReadAgainAtBurstOnIdleWorkers(t *testing.T) {
	q := goDefaultQueue(t, "slots-stale", 64)
	var reads atomic.Int32
	var tight atomic.Bool
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		if !tight.Load() {
			return math.MaxInt, sched.ThreadLimit{}, nil
		}
		reads.Add(1)
		return sched.GateMargin() + 64, sched.ThreadLimit{Name: "test", Max: 1000, Current: 1000 - sched.GateMargin() - 64}, nil
	})
	defer restore()
	goThreadsReread()
	defer goThreadsReread()
	burst := func(n int) {
		var started sync.WaitGroup
		started.Add(n)
		release := make(chan struct{})
		for range n {
			q.Go(func() { started.Done(); <-release })
		}
		testutil.MustReturn(t, "the burst starts", started.Wait)
		close(release)
		q.Flush()
	}
	burst(16) // 16 workers, idle after
	// The reading found no limit; a limit is set a while after.
	time.Sleep(goThreadsReadEvery + 100*time.Millisecond)
	tight.Store(true)
	burst(4)
	// The reading runs off the items' path, on a goroutine of its own.
	testutil.WaitFor(t, "a burst served by idle workers after the last reading to read the thread limits", func() bool {
		return reads.Load() > 0
	})
}

// TestLongRTPWaitWarningGoesToQueueLogger: the RT P-wait warning is about
// one queue, so it goes to that queue's own logger (WithLogger), not the
// process-wide one.
func TestLongRTPWaitWarningGoesToQueueLogger(t *testing.T) {
	var pbuf, qbuf bytes.Buffer
	var mu sync.Mutex
	SetLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &pbuf}, nil)))
	defer SetLogger(nil)
	rtPWaitWarned.Store(false)
	defer rtPWaitWarned.Store(false)
	ql := slog.New(slog.NewTextHandler(lockedWriter{&mu, &qbuf}, nil))
	pq := &pwq{pool: &pool{key: poolKey{cpu: -1, class: classAttrs{policy: sched.PolicyFIFO, prio: 50}}},
		wq: &Workqueue{name: "pw-own", logger: ql}}
	wk := &worker{pwait: int64(3 * time.Millisecond), pwaitSet: true}
	wk.chargePWait(pq)
	testutil.WaitFor(t, "the warning", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(qbuf.String()+pbuf.String(), "waited for a Go P")
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(qbuf.String(), "waited for a Go P") {
		t.Fatalf("the warning went to the process-wide logger, not the queue's:\nprocess: %s\nqueue: %s", pbuf.String(), qbuf.String())
	}
}

// TestGoSlotNotHandedWithinPool: a worker that has kept its slot over
// goSlotKeep gives it up only to a waiter of another pool. Handing it to
// a worker of its own pool, which runs the same worklist, only parks one
// worker and wakes another at every item boundary (each wake-up one more
// wait in line, with its sampling) while the pool is at the bound.
func TestGoSlotNotHandedWithinPool(t *testing.T) {
	reserveForTest(t, 1)
	q := goDefaultQueue(t, "slots-within", 64)
	const n = 80
	_, _, lifts0, forced0, waits0, _ := goSlotCounts()
	for range n {
		q.Go(func() {
			// 3 ms of CPU: over goSlotKeep.
			for end := time.Now().Add(3 * time.Millisecond); time.Now().Before(end); {
			}
		})
	}
	q.Flush()
	_, _, lifts, forced, waits, _ := goSlotCounts()
	t.Logf("%d waits in line for %d items (lifts %d, forced %d)", waits-waits0, n, lifts-lifts0, forced-forced0)
	if waits-waits0 > n/8 {
		t.Fatalf("%d waits in line for %d CPU-bound items of one pool: its workers handed the slot to each other at item boundaries", waits-waits0, n)
	}
}
