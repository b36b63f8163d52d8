package wq_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gowq/wq"
)

// waitChan waits for ch for up to 60 s (generous: a slow machine passes,
// a lost item fails instead of hanging the suite).
func waitChan(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// keyGate is an item that blocks its key until opened.
type keyGate struct {
	w       *wq.Work
	started chan struct{}
	open    chan struct{}
}

func newKeyGate() *keyGate {
	g := &keyGate{started: make(chan struct{}), open: make(chan struct{})}
	g.w = wq.NewWork(func() {
		close(g.started)
		<-g.open
	})
	return g
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
