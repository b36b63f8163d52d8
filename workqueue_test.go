package wq_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
)

// TestMaxActiveRange: 0 is the default, and a max_active outside
// [0, 2048] is refused by Alloc (nothing created) and by SetMaxActive
// (nothing changed), one rule with WithMaxPending(-1).
func TestMaxActiveRange(t *testing.T) {
	q := mustAlloc(t, "range", wq.Unbound, 0)
	if got := q.MaxActive(); got != wq.DefaultMaxActive {
		t.Errorf("Alloc max_active 0: MaxActive() = %d, want %d", got, wq.DefaultMaxActive)
	}
	before := len(wq.Queues(false))
	for _, n := range []int{-5, -1, wq.MaxActive + 1, 5000} {
		q, err := wq.Alloc("range-bad", wq.Unbound, n)
		if !errors.Is(err, wq.ErrInvalidArgument) || q != nil {
			t.Errorf("Alloc max_active %d: created %v, %v; want nil, ErrInvalidArgument", n, q != nil, err)
			if q != nil {
				q.Destroy()
			}
		}
	}
	if after := len(wq.Queues(false)); after != before {
		t.Errorf("refused Allocs left %d queues, want %d", after, before)
	}
	q = mustAlloc(t, "range", wq.Unbound, 4)
	if err := q.SetMaxActive(0); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetMaxActive(0) = %v, want ErrInvalidArgument", err)
	}
	if q.MaxActive() != 4 {
		t.Errorf("failed SetMaxActive changed the value to %d", q.MaxActive())
	}
}

func TestOrdered(t *testing.T) {
	q, err := wq.AllocOrdered("ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	var mu sync.Mutex
	var order []int
	var inside, overlaps atomic.Int32
	works := make([]*wq.Work, 200)
	for i := range works {
		works[i] = wq.NewWork(func() {
			if inside.Add(1) > 1 {
				overlaps.Add(1)
			}
			if i%7 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			inside.Add(-1)
		})
	}
	for i, w := range works {
		q.QueueOn(i%runtime.NumCPU(), w)
	}
	q.Flush()
	if overlaps.Load() != 0 {
		t.Errorf("ordered queue ran %d items concurrently", overlaps.Load())
	}
	if len(order) != len(works) {
		t.Fatalf("ran %d of %d", len(order), len(works))
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("order[%d] = %d, want %d", i, v, i)
		}
	}
}

// maxConcurrent runs n sleeping items and reports the peak concurrency.
func maxConcurrent(t *testing.T, q *wq.Workqueue, n int, queue func(w *wq.Work) bool) int32 {
	var cur, peak atomic.Int32
	works := make([]*wq.Work, n)
	for i := range works {
		works[i] = wq.NewWork(func() {
			c := cur.Add(1)
			for {
				p := peak.Load()
				if c <= p || peak.CompareAndSwap(p, c) {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
			cur.Add(-1)
		})
	}
	for _, w := range works {
		if !queue(w) {
			t.Fatal("queue returned false")
		}
	}
	q.Flush()
	return peak.Load()
}

func TestMaxActivePerCPU(t *testing.T) {
	q := mustAlloc(t, "maxact", wq.PerCPU, 2)
	peak := maxConcurrent(t, q, 12, func(w *wq.Work) bool { return q.QueueOn(0, w) })
	if peak > 2 {
		t.Errorf("per-CPU max_active 2: peak concurrency on one CPU %d", peak)
	}
	if peak < 1 {
		t.Error("nothing ran")
	}
}

func TestMaxActiveUnbound(t *testing.T) {
	q := mustAlloc(t, "maxact-u", wq.Unbound, 3)
	peak := maxConcurrent(t, q, 15, q.Queue)
	if peak > 3 {
		t.Errorf("unbound max_active 3: peak %d", peak)
	}
	if peak < 2 {
		// Not a timing assertion: sleeping items on an unbound queue each
		// get a worker; with 15 queued at once at least 2 must overlap.
		t.Errorf("unbound queue never ran items in parallel (peak %d)", peak)
	}
	// Raising max_active lets more run.
	if err := q.SetMaxActive(6); err != nil {
		t.Fatal(err)
	}
	if q.Congested(0) {
		t.Error("Congested after flush")
	}
}

func TestCongested(t *testing.T) {
	q := mustAlloc(t, "cong", wq.PerCPU, 1)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	a := wq.NewWork(func() { started <- struct{}{}; <-release })
	b := wq.NewWork(func() {})
	q.QueueOn(0, a)
	<-started
	q.QueueOn(0, b)
	if !q.Congested(0) {
		t.Error("Congested(0) = false with an item on the inactive list")
	}
	close(release)
	q.Flush()
	if q.Congested(0) {
		t.Error("Congested(0) = true after flush")
	}
}

// TestNonStrictStartsInPod: with the cpu scope and strict off, each pod's
// workers may run on every CPU, but each item starts inside its pod; a
// worker found outside is moved back and counted as a repatriation (RPR).
func TestNonStrictStartsInPod(t *testing.T) {
	cpus := wq.OnlineCPUs()
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs")
	}
	q := mustAlloc(t, "nonstrict", wq.Unbound, 0, wq.Threads()) // repatriation moves threads
	if err := q.SetAffinityScope(wq.ScopeCPU); err != nil {
		t.Fatal(err)
	}
	if err := q.SetAffinityStrict(false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		cpu := cpus[i%len(cpus)]
		var ran atomic.Int32
		ran.Store(-1)
		var tid atomic.Int32
		w := wq.NewWork(func() { ran.Store(int32(wq.GetCPU())); tid.Store(int32(wq.Gettid())) })
		q.QueueOn(cpu, w)
		w.Flush()
		if int(ran.Load()) != cpu {
			t.Fatalf("item for the pod of CPU %d started on CPU %d", cpu, ran.Load())
		}
		// Non-strict: the worker may leave the pod afterwards.
		if aff, _ := sched.Affinity(int(tid.Load())); len(aff) != len(cpus) {
			t.Fatalf("non-strict worker affinity %v, want all CPUs %v", aff, cpus)
		}
		// Push the worker out of its pod now and then, so that the next
		// item needs a repatriation.
		if i%10 == 0 {
			_ = sched.SetAffinity(int(tid.Load()), []int{cpus[(i+1)%len(cpus)]})
			_ = sched.SetAffinity(int(tid.Load()), cpus)
		}
	}
	t.Logf("RPR %d", q.Stats().RPR)
}

// TestOrderedAcrossAttrChanges: an ordered queue keeps queue order and
// finishes while its attributes change under load (the stranger's F1), and
// retired pwqs are released rather than piling up.
func TestOrderedAcrossAttrChanges(t *testing.T) {
	q, err := wq.AllocOrdered("ord-attr", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	const n = 5000
	var last, bad atomic.Int64
	last.Store(-1)
	works := make([]*wq.Work, n)
	for i := range works {
		k := int64(i)
		works[i] = wq.NewWork(func() {
			if last.Load() != k-1 {
				bad.Add(1)
			}
			last.Store(k)
		})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	var changes atomic.Int64
	go func() {
		defer close(done)
		masks := []string{"1", "3"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = q.SetAttr("cpumask", masks[i%2])
			changes.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	for _, w := range works {
		if !q.Queue(w) {
			t.Fatal("Queue returned false")
		}
	}
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(60 * time.Second):
		t.Fatalf("Flush did not return; ran up to %d of %d", last.Load(), n)
	}
	close(stop)
	<-done
	if b := bad.Load(); b != 0 {
		t.Errorf("%d of %d items ran out of order across %d attribute changes", b, n, changes.Load())
	}
	if last.Load() != n-1 {
		t.Errorf("last item run %d, want %d", last.Load(), n-1)
	}
	if got := q.Stats().Total; got != n {
		t.Errorf("Stats().Total = %d, want %d (retired pwqs' counters kept)", got, n)
	}
	if pools := len(q.PoolIDs()); pools == 0 {
		t.Error("no pools")
	}
	// Retired pwqs that still held items at the last change are released
	// by the next change, now that everything has run. Flush returns when
	// the last item completed, a moment before its worker drops the pwq's
	// in-flight count, so changes are made until then (a write of the value
	// in force is no change: each round writes both masks).
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, m := range []string{"1", "3"} {
			if err := q.SetAttr("cpumask", m); err != nil {
				t.Fatal(err)
			}
		}
		live := q.NumPwqs()
		if live <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%d pwqs still held after %d attribute changes; retired ones must be released", live, changes.Load())
			break
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueueType: Type distinguishes per-CPU, unbound and ordered queues
// (what metrics and wqhttp show as TYPE).
func TestQueueType(t *testing.T) {
	o, err := wq.AllocOrdered("qt-ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Destroy)
	for _, c := range []struct {
		q    *wq.Workqueue
		want wq.QueueType
		str  string
	}{
		{mustAlloc(t, "qt-percpu", 0, 1), wq.TypePerCPU, "percpu"},
		{mustAlloc(t, "qt-unbound", wq.Unbound, 1), wq.TypeUnbound, "unbound"},
		{o, wq.TypeOrdered, "ordered"},
	} {
		if got := c.q.Type(); got != c.want || got.String() != c.str {
			t.Errorf("%s: Type() = %v (%q), want %v (%q)", c.q.Name(), got, got.String(), c.want, c.str)
		}
	}
	if s := wq.QueueType(9).String(); s != "QueueType(9)" {
		t.Errorf("QueueType(9).String() = %q", s)
	}
}
