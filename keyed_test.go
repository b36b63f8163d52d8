package wq_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"pgregory.net/rapid"
)

// keyGate is an item that blocks its key until opened.
type keyGate struct {
	w       *wq.Work
	started chan struct{}
	open    chan struct{}
}

// keyLog records, per key, the items that ran, and checks that no two
// items of a key ever run at once.
type keyLog struct {
	mu      sync.Mutex
	runs    map[uint64][]int
	running map[uint64]*atomic.Int32
	errs    []string
}

func newKeyLog(keys ...uint64) *keyLog {
	l := &keyLog{runs: map[uint64][]int{}, running: map[uint64]*atomic.Int32{}}
	for _, k := range keys {
		l.running[k] = &atomic.Int32{}
	}
	return l
}

func (l *keyLog) run(key uint64, id int) {
	r := l.running[key]
	if n := r.Add(1); n != 1 {
		l.mu.Lock()
		l.errs = append(l.errs, fmt.Sprintf("key %d: item %d runs with %d other item(s) of its key", key, id, n-1))
		l.mu.Unlock()
	}
	l.mu.Lock()
	l.runs[key] = append(l.runs[key], id)
	l.mu.Unlock()
	for range 3 {
		runtime.Gosched() // widen the window an overlap would need
	}
	r.Add(-1)
}

func (l *keyLog) check(t interface{ Errorf(string, ...any) }) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.errs {
		t.Errorf("%s", e)
	}
}

// The keyed model test: items 0..4 and keys 0..2 on one queue.
//
// Phase 1 is exact: every key is first blocked by a gate item, so nothing
// else runs, and each QueueKeyed, Queue (dedup), Cancel, CancelSync,
// Disable, Enable and Pending result, and each ErrKeyConflict report, is
// checked against a model of per-key FIFOs. Phase 2 opens the gates in a
// random order while more random operations run against items that may be
// running (their results are recorded, not predicted). It ends with a
// Flush, a Drain or a Destroy (with the gates opened after Destroy began).
// Checked: the items of each key ran exactly in the order of their
// successful QueueKeyed calls minus the instances that a Cancel or Disable
// took back, never two at once; after the end no key state is left.
func TestQueueKeyedModel(t *testing.T) {
	quietLogs(t)
	rapid.Check(t, func(rt *rapid.T) { runKeyedModel(rt) })
}

func runKeyedModel(rt *rapid.T) {
	const nItems, nKeys = 5, 3
	var conflicts, draining atomic.Int64
	wq.SetErrorHandler(func(op, fn string, err error) {
		switch {
		case errors.Is(err, wq.ErrKeyConflict):
			conflicts.Add(1)
		case errors.Is(err, wq.ErrDraining), errors.Is(err, wq.ErrDestroyed):
			draining.Add(1)
		case op == "create_worker" && errors.Is(err, wq.ErrPermission) && strings.Contains(err.Error(), "inherited nice"):
			// A niced unprivileged process: the normal class's workers keep
			// the inherited nice, and the pool says so once.
		default:
			rt.Errorf("unexpected report %s: %v", op, err)
		}
	})
	defer wq.SetErrorHandler(nil)
	maxActive := rapid.SampledFrom([]int{1, 2, 4, 16}).Draw(rt, "max-active")
	flags := rapid.SampledFrom([]wq.Flags{wq.Unbound, wq.PerCPU}).Draw(rt, "flags")
	q, err := wq.Alloc("keyed-model", flags, maxActive)
	if err != nil {
		rt.Fatalf("Alloc: %v", err)
	}
	defer q.Destroy()
	log := newKeyLog(0, 1, 2)
	var curKey [nItems]atomic.Uint64 // key of the item's keyed instance (stable while it runs)
	items := make([]*wq.Work, nItems)
	for i := range items {
		items[i] = wq.NewWork(func() { log.run(curKey[i].Load(), i) })
	}
	gates := make([]*keyGate, nKeys)
	for k := range gates {
		gates[k] = newKeyGate()
		curKeyGate := uint64(k)
		gates[k].w.Init(func() {
			log.run(curKeyGate, -1)
			<-gates[k].open
		})
		if !q.QueueKeyed(uint64(k), gates[k].w) {
			rt.Fatalf("QueueKeyed(gate %d) = false", k)
		}
	}
	var opened [nKeys]sync.Once
	openGate := func(k int) { opened[k].Do(func() { close(gates[k].open) }) }
	defer func() { // on failure too, so that the deferred Destroy returns
		for k := range nKeys {
			openGate(k)
		}
	}()
	// Model.
	expected := make([][]int, nKeys) // per key: instances that must run, in order (gate first)
	for k := range expected {
		expected[k] = []int{-1}
	}
	pendingKey := make([]int, nItems) // -1: not pending
	for i := range pendingKey {
		pendingKey[i] = -1
	}
	disabled := make([]int, nItems)
	takeBack := func(i int) {
		k := int(curKey[i].Load())
		e := expected[k]
		for x := len(e) - 1; x >= 0; x-- {
			if e[x] == i {
				expected[k] = slices.Delete(e, x, x+1)
				return
			}
		}
		rt.Fatalf("item %d taken back but not expected on key %d", i, k)
	}
	wantConflicts := int64(0)
	ops := rapid.IntRange(5, 40).Draw(rt, "ops")
	for range ops {
		i := rapid.IntRange(0, nItems-1).Draw(rt, "item")
		w := items[i]
		switch op := rapid.SampledFrom([]string{"keyed", "keyed", "keyed", "queue", "cancel", "cancel-sync", "disable", "enable", "pending"}).Draw(rt, "op"); op {
		case "keyed":
			k := rapid.IntRange(0, nKeys-1).Draw(rt, "key")
			want := pendingKey[i] < 0 && disabled[i] == 0
			if pendingKey[i] >= 0 && pendingKey[i] != k {
				wantConflicts++
			}
			if want {
				curKey[i].Store(uint64(k)) // nothing of item i runs in phase 1
			}
			if got := q.QueueKeyed(uint64(k), w); got != want {
				rt.Fatalf("QueueKeyed(%d, item %d) = %v, model %v", k, i, got, want)
			}
			if want {
				pendingKey[i] = k
				expected[k] = append(expected[k], i)
			}
		case "queue":
			if pendingKey[i] < 0 {
				continue // would run outside every key
			}
			if q.Queue(w) {
				rt.Fatalf("Queue(item %d) of a chained item = true", i)
			}
		case "cancel", "cancel-sync", "disable":
			want := pendingKey[i] >= 0
			var got bool
			switch op {
			case "cancel":
				got = w.Cancel()
			case "cancel-sync":
				got = w.CancelSync()
			default:
				got = w.Disable()
				disabled[i]++
			}
			if got != want {
				rt.Fatalf("%s(item %d) = %v, model %v", op, i, got, want)
			}
			if want {
				takeBack(i)
				pendingKey[i] = -1
			}
		case "enable":
			if disabled[i] == 0 {
				continue
			}
			disabled[i]--
			if got := w.Enable(); got != (disabled[i] == 0) {
				rt.Fatalf("Enable(item %d) = %v, model %v", i, got, disabled[i] == 0)
			}
		case "pending":
			if got := w.Pending(); got != (pendingKey[i] >= 0) {
				rt.Fatalf("Pending(item %d) = %v, model %v", i, got, pendingKey[i] >= 0)
			}
		}
	}
	if got := conflicts.Load(); got != wantConflicts {
		rt.Fatalf("ErrKeyConflict reported %d times, model %d", got, wantConflicts)
	}
	// Phase 2: open the gates; more operations race with running items.
	order := rapid.Permutation([]int{0, 1, 2}).Draw(rt, "gate-order")
	ending := rapid.SampledFrom([]string{"flush", "drain", "destroy"}).Draw(rt, "ending")
	destroyed := make(chan struct{})
	if ending == "destroy" && rapid.Bool().Draw(rt, "destroy-first") {
		// Destroy while every key is still gated: it must drain the chains.
		go func() { q.Destroy(); close(destroyed) }()
		ending = "destroy-started"
	}
	racing := ending != "destroy-started"
	for _, k := range order {
		openGate(k)
		if !racing {
			continue
		}
		for range rapid.IntRange(0, 6).Draw(rt, "racing-ops") {
			i := rapid.IntRange(0, nItems-1).Draw(rt, "item")
			w := items[i]
			switch rapid.SampledFrom([]string{"keyed", "keyed", "cancel", "disable-enable"}).Draw(rt, "race-op") {
			case "keyed":
				// Under the item's last key only: an instance under
				// another key may be running, and curKey must not
				// change under it.
				k := curKey[i].Load()
				if q.QueueKeyed(k, w) {
					expected[k] = append(expected[k], i)
				}
			case "cancel":
				if w.Cancel() {
					takeBack(i)
				}
			case "disable-enable":
				if w.Disable() {
					takeBack(i)
				}
				w.Enable()
			}
		}
	}
	switch ending {
	case "flush":
		q.Flush()
	case "drain":
		q.Drain()
	case "destroy":
		q.Destroy()
	case "destroy-started":
		<-destroyed
	}
	log.check(rt)
	log.mu.Lock()
	for k := range nKeys {
		if got := log.runs[uint64(k)]; !slices.Equal(got, expected[k]) {
			rt.Fatalf("key %d ran %v, expected %v (-1 = gate)", k, got, expected[k])
		}
	}
	log.mu.Unlock()
	if keys, _ := q.KeyStates(); keys != 0 || q.KeyedInFlight() != 0 {
		rt.Fatalf("after %s: %d key states, %d keyed instances in flight", ending, keys, q.KeyedInFlight())
	}
	if draining.Load() != 0 {
		rt.Fatalf("%d draining/destroyed reports: no queue call was made after the end", draining.Load())
	}
}

// Items of different keys run concurrently: three gates, each of which
// waits until all three run, finish only if the keys overlap in time.
func TestQueueKeyedKeysRunConcurrently(t *testing.T) {
	q := mustAlloc(t, "keyed-conc", wq.Unbound, 4)
	var started atomic.Int32
	all := make(chan struct{})
	done := make(chan struct{}, 3)
	for k := range 3 {
		w := wq.NewWork(func() {
			if started.Add(1) == 3 {
				close(all)
			}
			select {
			case <-all:
			case <-time.After(60 * time.Second):
			}
			done <- struct{}{}
		})
		if !q.QueueKeyed(uint64(k), w) {
			t.Fatalf("QueueKeyed(%d) = false", k)
		}
	}
	for range 3 {
		waitChan(t, "three keys", done)
	}
	select {
	case <-all:
	default:
		t.Fatalf("only %d of 3 keys ran at once with max_active 4", started.Load())
	}
}

// A key with 10^4 items queued does not delay an idle key: the hot key's
// backlog waits in its chain, not on the workqueue.
func TestQueueKeyedColdKeyBehindHotKey(t *testing.T) {
	q := mustAlloc(t, "keyed-hot", wq.Unbound, 2)
	const hot, cold, n = 1, 2, 10000
	g := newKeyGate()
	var openOnce sync.Once
	openGate := func() { openOnce.Do(func() { close(g.open) }) }
	t.Cleanup(openGate) // before the queue's Destroy, also after a failure
	if !q.QueueKeyed(hot, g.w) {
		t.Fatal("QueueKeyed(gate) = false")
	}
	var hotRan atomic.Int32
	for range n {
		if !q.QueueKeyed(hot, wq.NewWork(func() { hotRan.Add(1) })) {
			t.Fatal("QueueKeyed(hot) = false")
		}
	}
	waitChan(t, "the hot key's gate to start", g.started)
	ran := make(chan struct{})
	if !q.QueueKeyed(cold, wq.NewWork(func() { close(ran) })) {
		t.Fatal("QueueKeyed(cold) = false")
	}
	waitChan(t, "the cold key's item behind a hot key's 10^4 items", ran)
	if got := hotRan.Load(); got != 0 {
		t.Fatalf("%d hot items ran while their key's gate was running", got)
	}
	// The cold item counts in flight until its worker finishes it, a
	// little after its function returned.
	waitFor(t, fmt.Sprintf("keyed in flight to come down to %d (the hot key's)", n+1), func() bool { return q.KeyedInFlight() == n+1 })
	openGate()
	q.Flush()
	if got := hotRan.Load(); got != n {
		t.Fatalf("after Flush %d of %d hot items ran", got, n)
	}
}

// 10^5 distinct keys in flight at once (max_active 1, the first item
// blocked), then drained: no key state is left beyond the bounded free
// lists, and the heap is back near its baseline (the shard maps that grew
// are dropped when they empty).
func TestQueueKeyedManyKeysBackToBaseline(t *testing.T) {
	q := mustAlloc(t, "keyed-many", wq.Unbound, 1)
	const n = 100000
	var ran atomic.Int64
	works := make([]wq.Work, n)
	for i := range works {
		works[i].Init(func() { ran.Add(1) })
	}
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	g := newKeyGate()
	q.QueueKeyed(1<<63, g.w)
	waitChan(t, "gate", g.started)
	base := heap()
	for i := range works {
		if !q.QueueKeyed(uint64(i)*7919, &works[i]) {
			t.Fatalf("QueueKeyed(%d) = false", i)
		}
	}
	peakKeys, _ := q.KeyStates()
	peak := heap()
	if peakKeys != n+1 {
		t.Fatalf("%d keys in flight, want %d", peakKeys, n+1)
	}
	close(g.open)
	q.Drain()
	if got := ran.Load(); got != n {
		t.Fatalf("%d of %d items ran", got, n)
	}
	keys, held := q.KeyStates()
	if keys != 0 || q.KeyedInFlight() != 0 {
		t.Fatalf("after Drain: %d keys, %d keyed instances in flight", keys, q.KeyedInFlight())
	}
	// Free lists only: 64 shards x 16.
	if held > 64*16 {
		t.Fatalf("after Drain %d key states held, want at most %d", held, 64*16)
	}
	after := heap()
	t.Logf("heap: baseline %d B, %d keys in flight %+d B, drained %+d B; key states held %d", base, peakKeys, peak-base, after-base, held)
	if after-base > (peak-base)/10 {
		t.Fatalf("heap after drain %+d B over baseline, with %d keys in flight %+d B", after-base, peakKeys, peak-base)
	}
	runtime.KeepAlive(works)
}

// Cancel, CancelSync, Disable and Flush act per item on chained items; the
// rest of the chain keeps its order.
func TestQueueKeyedCancelChained(t *testing.T) {
	q := mustAlloc(t, "keyed-cancel", wq.Unbound, 4)
	log := newKeyLog(5)
	g := newKeyGate()
	if !q.QueueKeyed(5, g.w) {
		t.Fatal("QueueKeyed(gate) = false")
	}
	items := make([]*wq.Work, 6)
	for i := range items {
		items[i] = wq.NewWork(func() { log.run(5, i) })
		if !q.QueueKeyed(5, items[i]) {
			t.Fatalf("QueueKeyed(item %d) = false", i)
		}
	}
	if q.Queue(items[0]) || q.QueueKeyed(5, items[0]) {
		t.Fatal("queueing a chained item again returned true")
	}
	if !items[1].Cancel() || !items[2].CancelSync() || !items[3].Disable() {
		t.Fatal("Cancel/CancelSync/Disable of a chained item returned false")
	}
	if items[1].Pending() || items[2].Pending() || items[3].Pending() || !items[4].Pending() {
		t.Fatal("Pending wrong after cancelling chained items")
	}
	if items[1].Cancel() {
		t.Fatal("second Cancel returned true")
	}
	if q.QueueKeyed(5, items[3]) {
		t.Fatal("QueueKeyed of a disabled item returned true")
	}
	// Requeue a cancelled item: it goes to the tail.
	if !q.QueueKeyed(5, items[1]) {
		t.Fatal("QueueKeyed after Cancel = false")
	}
	flushed := make(chan bool)
	go func() { flushed <- items[4].Flush() }()
	// Open the gate only once the Flush waits (else items[4] may have run
	// before Flush began, and Flush rightly returns false).
	for end := time.Now().Add(60 * time.Second); items[4].FlushWaiters() == 0; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(end) {
			t.Fatal("Flush of the chained item never began waiting")
		}
	}
	close(g.open)
	if !<-flushed {
		t.Fatal("Flush of a chained item did not wait")
	}
	q.Flush()
	log.check(t)
	if got, want := log.runs[5], []int{0, 4, 5, 1}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if !items[3].Enable() || !q.QueueKeyed(5, items[3]) {
		t.Fatal("Enable/QueueKeyed after Disable failed")
	}
	q.Flush()
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Fatalf("%d keys left", keys)
	}
}

// Workqueue.Flush waits for items still waiting in their key's chain.
func TestQueueKeyedFlushWaitsForChain(t *testing.T) {
	q := mustAlloc(t, "keyed-flush", wq.PerCPU, 4)
	g := newKeyGate()
	q.QueueKeyed(9, g.w)
	var ran atomic.Int32
	for range 100 {
		q.QueueKeyed(9, wq.NewWork(func() { ran.Add(1) }))
	}
	waitChan(t, "gate", g.started)
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	close(g.open)
	waitChan(t, "flush", flushed)
	if got := ran.Load(); got != 100 {
		t.Fatalf("Flush returned with %d of 100 chained items run", got)
	}
}

// The same Work under two keys (or two queues) while in flight is refused
// with ErrKeyConflict and left as it was.
func TestQueueKeyedConflict(t *testing.T) {
	errs := captureErrors(t)
	q := mustAlloc(t, "keyed-conflict", wq.Unbound, 4)
	q2 := mustAlloc(t, "keyed-conflict2", wq.Unbound, 4)
	g := newKeyGate()
	q.QueueKeyed(1, g.w)
	var ran atomic.Int32
	w := wq.NewWork(func() { ran.Add(1) })
	if !q.QueueKeyed(1, w) {
		t.Fatal("QueueKeyed = false")
	}
	if q.QueueKeyed(2, w) || q2.QueueKeyed(1, w) {
		t.Fatal("QueueKeyed under another key returned true")
	}
	if got := errs.count(wq.ErrKeyConflict); got != 2 {
		t.Fatalf("ErrKeyConflict reported %d times, want 2", got)
	}
	if q.QueueKeyed(1, w) || errs.count(wq.ErrKeyConflict) != 2 {
		t.Fatal("same key while pending: want false without a conflict report")
	}
	// The gate is a running keyed instance under key 1: requeueing it
	// under key 3 is refused too.
	waitChan(t, "gate", g.started)
	if q.QueueKeyed(3, g.w) || errs.count(wq.ErrKeyConflict) != 3 {
		t.Fatal("running under another key: want false and a conflict report")
	}
	close(g.open)
	q.Flush()
	if ran.Load() != 1 {
		t.Fatalf("item ran %d times, want 1", ran.Load())
	}
	if !q.QueueKeyed(2, w) {
		t.Fatal("QueueKeyed under a new key after the item finished = false")
	}
	q.Flush()
	if ran.Load() != 2 {
		t.Fatalf("item ran %d times, want 2", ran.Load())
	}
}

// Destroy drains the chains, like destroy_workqueue drains the queue.
func TestQueueKeyedDestroyDrainsChains(t *testing.T) {
	errs := captureErrors(t)
	q, err := wq.Alloc("keyed-destroy", wq.Unbound, 2)
	if err != nil {
		t.Fatal(err)
	}
	g := newKeyGate()
	q.QueueKeyed(1, g.w)
	var ran atomic.Int32
	for k := range 4 {
		for range 50 {
			q.QueueKeyed(uint64(k), wq.NewWork(func() { ran.Add(1) }))
		}
	}
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	close(g.open)
	waitChan(t, "Destroy", destroyed)
	if got := ran.Load(); got != 200 {
		t.Fatalf("Destroy returned with %d of 200 keyed items run", got)
	}
	if q.QueueKeyed(1, wq.NewWork(func() {})) {
		t.Fatal("QueueKeyed after Destroy = true")
	}
	if errs.count(wq.ErrDestroyed) != 1 {
		t.Fatalf("ErrDestroyed reported %d times, want 1", errs.count(wq.ErrDestroyed))
	}
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Fatalf("%d keys left after Destroy", keys)
	}
}

// No allocation per item: chaining and unchaining on a busy key, and a
// whole queue-run-release round trip on an idle key.
func TestQueueKeyedAllocs(t *testing.T) {
	q := mustAlloc(t, "keyed-allocs", wq.Unbound, 4)
	g := newKeyGate()
	q.QueueKeyed(1, g.w)
	waitChan(t, "gate", g.started)
	ws := make([]*wq.Work, 8)
	for i := range ws {
		ws[i] = wq.NewWork(func() {})
	}
	chain := testing.AllocsPerRun(200, func() {
		for _, w := range ws {
			q.QueueKeyed(1, w)
		}
		for _, w := range ws {
			w.Cancel()
		}
	})
	close(g.open)
	done := make(chan struct{}, 1)
	w := wq.NewWork(func() { done <- struct{}{} })
	key := uint64(0)
	roundTrip := func() {
		key++
		q.QueueKeyed(key%64, w)
		<-done
		for w.Busy() != 0 {
			runtime.Gosched()
		}
	}
	// Warm every key's shard first (its map and a free key state): cold
	// shards alone cost about 0.6 allocations per run over 200 runs, which
	// AllocsPerRun's integer division hides until background allocations
	// push the total past 200 (a 1.00 failure).
	for range 64 {
		roundTrip()
	}
	idle := testing.AllocsPerRun(200, roundTrip)
	t.Logf("allocs per run: chain+cancel of 8 items %.2f, idle-key round trip %.2f", chain, idle)
	if chain != 0 {
		t.Errorf("chaining and cancelling 8 items allocates %.2f times", chain)
	}
	if idle >= 0.5 {
		t.Errorf("an idle key's round trip allocates %.2f times", idle)
	}
}

// Race stress: four goroutines queue keyed items (and cancel some) on
// keys of their own while max_active changes and the queue is flushed,
// then destroyed mid-stream. Every accepted, uncancelled item runs exactly
// once, in its key's order, never beside another item of its key.
func TestQueueKeyedStress(t *testing.T) {
	quietLogs(t)
	q, err := wq.Alloc("keyed-stress", wq.Unbound, 4)
	if err != nil {
		t.Fatal(err)
	}
	const gors, keysPer, perGor = 4, 8, 3000
	type rec struct {
		mu      sync.Mutex
		ran     []int
		running atomic.Int32
	}
	recs := make([]rec, gors*keysPer)
	var overlap atomic.Int32
	var wg sync.WaitGroup
	expected := make([][]int, gors*keysPer)
	stop := make(chan struct{})
	var aux sync.WaitGroup
	aux.Add(1)
	go func() {
		defer aux.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = q.SetMaxActive(1 + r.IntN(8))
			if r.IntN(4) == 0 {
				q.Flush()
			}
			runtime.Gosched()
		}
	}()
	for g := range gors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var last [keysPer]*wq.Work
			for i := range perGor {
				k := g*keysPer + r.IntN(keysPer)
				rc := &recs[k]
				w := wq.NewWork(func() {
					if rc.running.Add(1) != 1 {
						overlap.Add(1)
					}
					rc.mu.Lock()
					rc.ran = append(rc.ran, i)
					rc.mu.Unlock()
					rc.running.Add(-1)
				})
				if q.QueueKeyed(uint64(k), w) {
					expected[k] = append(expected[k], i)
					if r.IntN(8) == 0 && last[k%keysPer] != nil && last[k%keysPer].Cancel() {
						// The item before it, if still chained or queued.
						e := expected[k]
						expected[k] = append(e[:len(e)-2], e[len(e)-1])
					}
					last[k%keysPer] = w
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	q.Destroy()
	wg.Wait()
	close(stop)
	aux.Wait()
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d times two items of one key ran at once", n)
	}
	total := 0
	for k := range recs {
		if !slices.Equal(recs[k].ran, expected[k]) {
			t.Fatalf("key %d: ran %d items %v..., expected %d %v...", k, len(recs[k].ran), firstTen(recs[k].ran), len(expected[k]), firstTen(expected[k]))
		}
		total += len(expected[k])
	}
	t.Logf("%d keyed items ran before and during Destroy", total)
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Fatalf("%d keys left after Destroy", keys)
	}
}

func firstTen(s []int) []int { return s[:min(len(s), 10)] }

// Cancelling or disabling a key's active item while it waits on the
// workqueue (over max_active) moves the key on to its next item.
func TestQueueKeyedCancelActive(t *testing.T) {
	q := mustAlloc(t, "keyed-cancel-active", wq.Unbound, 1)
	log := newKeyLog(1, 2)
	g := newKeyGate() // key 2 holds the only max_active slot
	q.QueueKeyed(2, g.w)
	waitChan(t, "gate", g.started)
	items := make([]*wq.Work, 4)
	for i := range items {
		items[i] = wq.NewWork(func() { log.run(1, i) })
		if !q.QueueKeyed(1, items[i]) {
			t.Fatalf("QueueKeyed(item %d) = false", i)
		}
	}
	if !items[0].Cancel() { // active, on the inactive list
		t.Fatal("Cancel of the active item = false")
	}
	if !items[1].Disable() { // active now (in transit or inactive)
		t.Fatal("Disable of the next item = false")
	}
	close(g.open)
	q.Flush()
	log.check(t)
	if got, want := log.runs[1], []int{2, 3}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	if keys, _ := q.KeyStates(); keys != 0 {
		t.Fatalf("%d keys left", keys)
	}
}

// TestKeyedInstanceHoldsKeyAgainstPlainInstance: a Work whose keyed instance
// runs on q1 is queued plainly on q2 (nice 5: another pool, so it could
// run at the same time, as the kernel allows across workqueues). Had the
// plain instance run and finished first, finishRun passed doneSeq (the
// plain, later instance) to keyedDone, which took d >= activeSeq as "the
// keyed instance is done" and started the next item of the key while the
// keyed instance still ran: a per-key mutual-exclusion violation. A Work
// now runs once at a time process-wide: the plain queueing is refused
// (ErrOtherQueue), and the key's next item waits for the keyed instance.
func TestKeyedInstanceHoldsKeyAgainstPlainInstance(t *testing.T) {
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

// TestModDelayedTakesActiveKeyedItemOutOfKey: ModDelayed of a DelayedWork
// whose keyed instance is the key's active item, waiting on the
// workqueue, grabs it off the pwq and arms it with the same instance
// sequence, so the key state still names it active: the key (and its
// chain) then waits for the timer, keyedN still counts it, and Drain,
// which does not otherwise wait for armed timers, waits for it too. A
// chained item taken by ModDelayed leaves its key instead (grabChained).
// Expected: ModDelayed takes the instance out of its key either way.
func TestModDelayedTakesActiveKeyedItemOutOfKey(t *testing.T) {
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

// TestQueueKeyedAcceptedRunsAcrossDestroy: a QueueKeyed that returned
// true runs, also when Destroy races it. A call that passed the
// lifecycle check just before Destroy began, and took its key after
// Destroy's drain had found no keyed item in flight, became the key's
// active instance on a destroyed queue (refused, cancelled) and took the
// calls chained behind it down with it, which had returned true. A
// stress: many goroutines queue on one key while the queue is destroyed,
// round after round; every round checks accepted == ran.
func TestQueueKeyedAcceptedRunsAcrossDestroy(t *testing.T) {
	captureErrors(t) // the refusals after Destroy
	budget := 15 * time.Second
	if testing.Short() {
		budget = 3 * time.Second
	}
	deadline := time.Now().Add(budget)
	for round := 0; round < 400 && time.Now().Before(deadline); round++ {
		q, err := wq.Alloc(fmt.Sprintf("keyed-destroy-%d", round), wq.Unbound, 0)
		if err != nil {
			t.Fatal(err)
		}
		var accepted, ran atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if q.QueueKeyed(1, wq.NewWork(func() { ran.Add(1) })) {
						accepted.Add(1)
					}
				}
			}()
		}
		time.Sleep(200 * time.Microsecond)
		q.Destroy()
		close(stop)
		wg.Wait()
		if a, r := accepted.Load(), ran.Load(); a != r {
			t.Fatalf("round %d: QueueKeyed returned true %d times, %d items ran (after Destroy returned)", round, a, r)
		}
	}
}
