package kthread_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gowq/wq/kthread"
)

// TestModelReturnValues drives one worker, held by a gate, with random
// queue / delayed queue / mod / cancel / pending calls on four items and
// checks every return value against a small reference model; then it
// opens the gate and checks that exactly the items the model holds queued
// ran, once each, in the model's order.
func TestModelReturnValues(t *testing.T) {
	wk := newWorker(t, "kt-model")
	rapid.Check(t, func(rt *rapid.T) {
		const (
			idle = iota
			queued
			armed
		)
		var mu sync.Mutex
		var ran []int
		works := make([]*kthread.Work, 2)
		dws := make([]*kthread.DelayedWork, 2)
		item := func(i int) *kthread.Work {
			if i < 2 {
				return works[i]
			}
			return &dws[i-2].Work
		}
		for i := 0; i < 4; i++ {
			fn := func() {
				mu.Lock()
				ran = append(ran, i)
				mu.Unlock()
			}
			if i < 2 {
				works[i] = kthread.NewWork(fn)
			} else {
				dws[i-2] = kthread.NewDelayedWork(fn)
			}
		}
		state := make([]int, 4)
		var order []int
		unqueue := func(i int) { order = slices.DeleteFunc(order, func(x int) bool { return x == i }) }

		g := &gate{started: make(chan struct{}), release: make(chan struct{})}
		g.w = kthread.NewWork(func() { close(g.started); <-g.release })
		wk.QueueWork(g.w)
		<-g.started
		defer g.open()

		for range rapid.IntRange(5, 40).Draw(rt, "ops") {
			i := rapid.IntRange(0, 3).Draw(rt, "item")
			switch op := rapid.SampledFrom([]string{"queue", "delayed", "mod", "cancel", "pending", "flush"}).Draw(rt, "op"); op {
			case "queue":
				want := state[i] == idle
				if got := wk.QueueWork(item(i)); got != want {
					rt.Fatalf("QueueWork(%d) in state %d = %v, want %v", i, state[i], got, want)
				}
				if want {
					state[i] = queued
					order = append(order, i)
				}
			case "delayed", "mod":
				if i < 2 {
					continue
				}
				d := time.Duration(rapid.SampledFrom([]int{0, 1}).Draw(rt, "hours")) * time.Hour
				var got, want bool
				if op == "delayed" {
					want = state[i] == idle
					got = wk.QueueDelayedWork(dws[i-2], d)
				} else {
					want = state[i] != idle
					got = wk.ModDelayedWork(dws[i-2], d)
					unqueue(i)
				}
				if got != want {
					rt.Fatalf("%s(%d, %v) in state %d = %v, want %v", op, i, d, state[i], got, want)
				}
				if op == "delayed" && !want {
					break
				}
				if d == 0 {
					state[i] = queued
					order = append(order, i)
				} else {
					state[i] = armed
				}
			case "cancel":
				want := state[i] != idle
				var got bool
				if i < 2 {
					got = wk.CancelWorkSync(works[i])
				} else {
					got = wk.CancelDelayedWorkSync(dws[i-2])
				}
				if got != want {
					rt.Fatalf("cancel(%d) in state %d = %v, want %v", i, state[i], got, want)
				}
				state[i] = idle
				unqueue(i)
			case "pending":
				if got, want := item(i).Pending(), state[i] != idle; got != want {
					rt.Fatalf("Pending(%d) in state %d = %v", i, state[i], got)
				}
			case "flush":
				if state[i] == idle && wk.FlushWork(item(i)) {
					rt.Fatalf("FlushWork(%d) of an idle item = true", i)
				}
			}
		}
		for i := 2; i < 4; i++ {
			if state[i] == armed && !wk.CancelDelayedWorkSync(dws[i-2]) {
				rt.Fatalf("CancelDelayedWorkSync(%d) of an armed item = false", i)
			}
		}
		g.open()
		wk.FlushWorker()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(ran, order) {
			rt.Fatalf("ran %v, want %v", ran, order)
		}
	})
}
