package wq_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// Review findings on per-key ordering (hrev2). A test here that fails
// documents an open finding; its comment says what it shows.

// TestReviewKeyedPlainInstanceEndsKeyedEarly: a Work whose keyed instance
// runs on q1 is queued plainly on q2 (nice 5: another pool, so it could
// run at the same time, as the kernel allows across workqueues). Had the
// plain instance run and finished first, finishRun passed doneSeq (the
// plain, later instance) to keyedDone, which took d >= activeSeq as "the
// keyed instance is done" and started the next item of the key while the
// keyed instance still ran: a per-key mutual-exclusion violation. A Work
// now runs once at a time process-wide: the plain queueing is refused
// (ErrOtherQueue), and the key's next item waits for the keyed instance.
func TestReviewKeyedPlainInstanceEndsKeyedEarly(t *testing.T) {
	errs := captureErrors(t)
	q1, err := wq.Alloc("rev-keyed-a", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q1.Destroy()
	q2, err := wq.Alloc("rev-keyed-b", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Destroy()
	// Other attributes, so another pool: nice 5, or 19 where a niced
	// unprivileged process may not set 5.
	if err := q2.SetNice(reachableNice(t, 5)); err != nil {
		t.Fatal(err)
	}

	started := make(chan struct{})
	open := make(chan struct{})
	plainDone := make(chan struct{})
	calls := 0 // only touched by the item's runs, which the test orders
	var a *wq.Work
	a = wq.NewWork(func() {
		calls++
		switch calls {
		case 1: // the keyed instance, on q1
			close(started)
			<-open
		case 2: // the plain instance, on q2
			close(plainDone)
		}
	})
	_ = a
	bRan := make(chan struct{})
	b := wq.NewWork(func() { close(bRan) })

	const key = 7
	if !q1.QueueKeyed(key, a) {
		t.Fatal("QueueKeyed(a) = false")
	}
	waitChan(t, "a's keyed instance to start", started)
	if !q1.QueueKeyed(key, b) {
		t.Fatal("QueueKeyed(b) = false")
	}
	defer func() {
		select {
		case <-open:
		default:
			close(open) // let a end before the deferred Destroys
		}
	}()
	if q2.Queue(a) {
		waitChan(t, "a's plain instance on q2", plainDone)
		t.Error("Queue(a) on q2 while a runs on q1 = true, want false (one instance at a time)")
	} else if n := errs.count(wq.ErrOtherQueue); n != 1 {
		t.Errorf("ErrOtherQueue reported %d times, want 1", n)
	}
	select {
	case <-bRan:
		t.Errorf("b (key %d) ran while a's keyed instance of that key was still running", key)
	case <-time.After(200 * time.Millisecond):
	}
	close(open)
	waitChan(t, "b", bRan)
	q1.Flush()
	if keys, _ := q1.KeyStates(); keys != 0 {
		t.Errorf("%d key(s) still in flight after Flush", keys)
	}
}

// TestReviewKeyedModDelayedActiveHoldsKey: ModDelayed of a DelayedWork
// whose keyed instance is the key's active item, waiting on the
// workqueue, grabs it off the pwq and arms it with the same instance
// sequence, so the key state still names it active: the key (and its
// chain) then waits for the timer, keyedN still counts it, and Drain,
// which does not otherwise wait for armed timers, waits for it too. A
// chained item taken by ModDelayed leaves its key instead (grabChained).
// Expected: ModDelayed takes the instance out of its key either way.
func TestReviewKeyedModDelayedActiveHoldsKey(t *testing.T) {
	quietLogs(t)
	q := mustAlloc(t, "rev-keyed-moddelayed", wq.Unbound, 1)
	g := newKeyGate() // holds the only max_active slot
	if !q.Queue(g.w) {
		t.Fatal("Queue(gate) = false")
	}
	waitChan(t, "gate", g.started)
	var ran atomic.Int32
	dw := wq.NewDelayedWork(func() { ran.Add(1) })
	const key = 3
	if !q.QueueKeyed(key, &dw.Work) { // active, on the inactive list
		t.Fatal("QueueKeyed(dw) = false")
	}
	bRan := make(chan struct{})
	b := wq.NewWork(func() { close(bRan) })
	if !q.QueueKeyed(key, b) { // chained behind dw
		t.Fatal("QueueKeyed(b) = false")
	}
	if !q.ModDelayed(dw, time.Hour) {
		t.Fatal("ModDelayed of the pending item = false")
	}
	close(g.open)
	select {
	case <-bRan:
	case <-time.After(30 * time.Second):
		t.Errorf("b, chained behind dw, did not run after dw was moved to a 1 h timer (key still held by the armed instance; keyed in flight %d)", q.KeyedInFlight())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.DrainContext(ctx); err != nil {
		t.Errorf("DrainContext with only an armed delayed item: %v (it waits for the 1 h timer)", err)
	}
	dw.Cancel()
}
