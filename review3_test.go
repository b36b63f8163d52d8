package wq_test

// Review 3: adaptive placement (escape_after). Each test here failed before
// the fix named in its comment.

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"go.uber.org/goleak"
)

// The escaper caches its thread's affinity and class to skip system calls.
// When a work function ends the escaper's thread (runtime.Goexit) the
// rescuer starts a new thread, which has the process's affinity, not the
// cached one: the next escape must set it again, or the escaped item may
// run on the very CPU it escapes from.
func TestReview3EscaperNewThreadAffinity(t *testing.T) {
	cpu := escapeCPU(t)
	wq.SetErrorHandler(func(op, fn string, err error) {}) // the Goexit report
	t.Cleanup(func() { wq.SetErrorHandler(nil) })
	q := allocEscape(t, "rev3-aff", wq.PerCPU, 0, time.Millisecond)
	holdPool(t, q, cpu)

	first := make(chan []int, 1)
	var a wq.Work
	a.Init(func() {
		aff, _ := sched.Affinity(0)
		first <- aff
		runtime.Goexit() // ends the escaper's thread
	})
	q.QueueOn(cpu, &a)
	if aff := <-first; slices.Contains(aff, cpu) {
		t.Fatalf("first escaped item: thread affinity %v holds the held CPU %d", aff, cpu)
	}
	q.Flush()

	second := make(chan []int, 1)
	var b wq.Work
	b.Init(func() {
		aff, _ := sched.Affinity(0)
		second <- aff
	})
	q.QueueOn(cpu, &b)
	select {
	case aff := <-second:
		if slices.Contains(aff, cpu) {
			t.Errorf("item escaped on the escaper's new thread with affinity %v, which holds the held CPU %d (stale cached affinity)", aff, cpu)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second item did not escape")
	}
	if st := q.Stats(); st.ESC != 2 {
		t.Errorf("ESC %d, want 2", st.ESC)
	}
}

// escape_after counts from an item's activation. An item activated (from
// max_active's inactive list) while escape_after was 0 must not count as
// having waited since time 0 once escape_after is set: it escaped at once
// although escape_after was a minute.
func TestReview3EscapeAfterSetLaterCountsFromActivation(t *testing.T) {
	cpu := escapeCPU(t)
	q := mustAlloc(t, "rev3-late", wq.PerCPU, 1)
	release := holdPool(t, q, cpu)
	var ran atomic.Int32
	var a, b wq.Work
	a.Init(func() { ran.Add(1) })
	b.Init(func() { ran.Add(1) })
	q.QueueOn(cpu, &a) // active: max_active 1
	q.QueueOn(cpu, &b) // inactive
	if !a.Cancel() {   // frees the slot: b is activated now, escape off
		t.Fatal("Cancel of a pending item returned false")
	}
	if err := q.SetEscapeAfter(time.Minute); err != nil {
		t.Fatal(err)
	}
	// An activation on the same pool marks it for the monitor's scan.
	q2 := allocEscape(t, "rev3-late2", wq.PerCPU, 0, time.Minute)
	var c wq.Work
	c.Init(func() { ran.Add(1) })
	q2.QueueOn(cpu, &c)
	time.Sleep(200 * time.Millisecond) // many monitor samples
	if n := ran.Load(); n != 0 {
		t.Errorf("item activated just now escaped with escape_after 1m (ran %d, ESC %d)", n, q.Stats().ESC)
	}
	release()
	q.Flush()
	q2.Flush()
	if n := ran.Load(); n != 2 {
		t.Errorf("ran %d, want 2", n)
	}
}

// Per-CPU pools are shared by every per-CPU queue of a class. An overdue
// item of an escape queue behind escScanMax (64) items of another queue on
// the same stalled pool must still escape: the monitor's scan looks past
// the first 64 items once per escDeepEvery, and escDue follows it (the
// item never escaped, and the monitor polled at cmFastPoll for as long as
// the pool stayed stalled).
func TestReview3EscapeBehindOtherQueuesItems(t *testing.T) {
	for _, n := range []int{64, 300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) { testEscapeBehindOtherQueuesItems(t, n) })
	}
}

func testEscapeBehindOtherQueuesItems(t *testing.T, nOther int) {
	cpu := escapeCPU(t)
	other := mustAlloc(t, "rev3-other", wq.PerCPU, 0)
	q := allocEscape(t, "rev3-behind", wq.PerCPU, 0, time.Millisecond)
	holdPool(t, q, cpu) // the pool both queues share
	works := make([]wq.Work, nOther)
	for i := range works {
		works[i].Init(func() {})
		other.QueueOn(cpu, &works[i])
	}
	done := make(chan int, 1)
	var w wq.Work
	w.Init(func() { done <- wq.GetCPU() })
	q.QueueOn(cpu, &w)
	select {
	case c := <-done:
		if c == cpu {
			t.Errorf("ran on the held CPU %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("an overdue item of an escape queue behind %d items of another queue did not escape in 5 s", nOther)
	}
}

// SetEscapeAfter says the change applies to items already queued. An item
// already waiting on a stalled pool when escape_after is set must escape
// without another item being queued (nothing marked the pool for the
// monitor: it never escaped).
func TestReview3SetEscapeAfterAppliesToQueued(t *testing.T) {
	cpu := escapeCPU(t)
	q := mustAlloc(t, "rev3-queued", wq.PerCPU, 0)
	holdPool(t, q, cpu)
	done := make(chan int, 1)
	var w wq.Work
	w.Init(func() { done <- wq.GetCPU() })
	q.QueueOn(cpu, &w)
	if err := q.SetEscapeAfter(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-done:
		if c == cpu {
			t.Errorf("ran on the held CPU %d", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an item queued before SetEscapeAfter did not escape in 5 s")
	}
}

// Destroy while the escaper runs an item of the queue, and Destroy right
// after the first escape starts the escaper's thread: Destroy waits for
// the item (it drains), the escaper's thread ends, no goroutine is left.
func TestReview3DestroyWhileEscaping(t *testing.T) {
	cpu := escapeCPU(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	q, err := wq.Alloc("rev3-destroy", wq.PerCPU, 0, wq.EscapeAfter(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	release := wq.HoldWakeups(q, cpu)
	gate := make(chan struct{})
	started, finished := make(chan struct{}), make(chan struct{})
	var w wq.Work
	w.Init(func() { close(started); <-gate; close(finished) })
	q.QueueOn(cpu, &w)
	<-started // on the escaper
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	select {
	case <-destroyed:
		t.Fatal("Destroy returned while the escaper ran an item of the queue")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	<-finished
	release() // Destroy then waits for the held worker to exit (pool put)
	<-destroyed
	if st := q.Stats(); st.ESC != 1 || st.Total != 1 {
		t.Errorf("ESC %d total %d, want 1 and 1", st.ESC, st.Total)
	}

	// Destroy racing the escaper's start: it drains, so the escaper must run
	// the item while the pool is held.
	for i := range 50 {
		q, err := wq.Alloc("rev3-destroy2", wq.PerCPU, 0, wq.EscapeAfter(20*time.Microsecond))
		if err != nil {
			t.Fatal(err)
		}
		release := wq.HoldWakeups(q, cpu)
		var ran atomic.Int32
		done := make(chan struct{})
		var w wq.Work
		w.Init(func() { ran.Add(1); close(done) })
		q.QueueOn(cpu, &w)
		destroyed := make(chan struct{})
		go func() { q.Destroy(); close(destroyed) }()
		select {
		case <-done: // the escaper ran it while the pool is held
		case <-time.After(10 * time.Second):
			release()
			t.Fatalf("round %d: Destroy's drain did not get the item escaped", i)
		}
		release()
		<-destroyed
		if n := ran.Load(); n != 1 {
			t.Fatalf("round %d: item ran %d times by the end of Destroy", i, n)
		}
	}
}

// Cancel, CancelSync and Flush racing the escaper's take of the same item:
// each instance either runs once or is cancelled, never both, never lost,
// and a Flush after the race returns with the queue empty.
func TestReview3CancelRacesEscape(t *testing.T) {
	cpu := escapeCPU(t)
	q := allocEscape(t, "rev3-cancel", wq.PerCPU, 0, 20*time.Microsecond)
	holdPool(t, q, cpu)
	var ran atomic.Int32
	var w wq.Work
	w.Init(func() { ran.Add(1) })
	cancelled := int32(0)
	for i := range 2000 {
		if !q.QueueOn(cpu, &w) {
			t.Fatalf("round %d: QueueOn returned false (still pending)", i)
		}
		if i%50 != 0 {
			time.Sleep(time.Duration(i%7) * 10 * time.Microsecond)
		}
		var ok bool
		if i%2 == 0 {
			ok = w.Cancel()
		} else {
			ok = w.CancelSync()
		}
		if ok {
			cancelled++
		}
		w.Flush()
		if got := ran.Load() + cancelled; got != int32(i+1) {
			t.Fatalf("round %d: ran %d + cancelled %d, want %d", i, ran.Load(), cancelled, i+1)
		}
	}
	q.Flush()
	if st := q.Stats(); st.ESC != int64(ran.Load()) {
		t.Errorf("ESC %d, ran %d (all escaped: the pool is held)", st.ESC, ran.Load())
	}
	t.Logf("ran %d, cancelled %d", ran.Load(), cancelled)
}
