package kthread_test

import (
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gowq/wq/kthread"
)

// TestModelReturnValues drives one worker, held by a gate, with random
// queue / delayed queue / mod / cancel / pending calls on four items and
// checks every return value against a small reference model; then it
// opens the gate and checks that exactly the items the model holds queued
// ran, once each, in the model's order. It runs on a normal worker (Go
// timers) and on a SCHED_FIFO-low one, whose delayed items are armed on
// the RT timer thread (skipped where SCHED_FIFO is refused).
func TestModelReturnValues(t *testing.T) {
	t.Run("normal", func(t *testing.T) { modelReturnValues(t, newWorker(t, "kt-model"), false) })
	t.Run("fifo-low", func(t *testing.T) {
		probe, err := kthread.CreateWorker("kt-model-probe", kthread.WithFIFOLow())
		if errors.Is(err, kthread.ErrPermission) {
			t.Skipf("SCHED_FIFO refused here, so no RT timers: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = probe.Destroy()
		modelReturnValues(t, newWorker(t, "kt-model-rt", kthread.WithFIFOLow()), true)
	})
}

func modelReturnValues(t *testing.T, wk *kthread.Worker, rtTimers bool) {
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
					if got := kthread.ArmedOnRT(dws[i-2]); got != rtTimers {
						rt.Fatalf("%s(%d, %v): armed on the RT timer thread = %v, want %v", op, i, d, got, rtTimers)
					}
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

// TestModelDestroyArmed: random queue / delayed / mod / cancel calls on a
// fresh worker held by a gate, then Destroy. The model: what is queued
// runs once, in order; what is armed (for an hour) is cancelled, named in
// ErrDelayedPending, and left idle; Destroy returns nil when nothing was
// armed.
func TestModelDestroyArmed(t *testing.T) {
	captureErrors(t)
	rapid.Check(t, func(rt *rapid.T) {
		wk, err := kthread.CreateWorker("kt-model-destroy")
		if err != nil {
			rt.Fatal(err)
		}
		const n = 4
		var mu sync.Mutex
		var ran []int
		dws := make([]*kthread.DelayedWork, n)
		for i := range dws {
			dws[i] = kthread.NewDelayedWork(func() {
				mu.Lock()
				ran = append(ran, i)
				mu.Unlock()
			})
		}
		const (
			idle = iota
			queued
			armed
		)
		state := make([]int, n)
		var order []int
		unqueue := func(i int) { order = slices.DeleteFunc(order, func(x int) bool { return x == i }) }
		g := &gate{started: make(chan struct{}), release: make(chan struct{})}
		g.w = kthread.NewWork(func() { close(g.started); <-g.release })
		wk.QueueWork(g.w)
		<-g.started
		for range rapid.IntRange(0, 20).Draw(rt, "ops") {
			i := rapid.IntRange(0, n-1).Draw(rt, "item")
			d := time.Duration(rapid.IntRange(0, 1).Draw(rt, "hours")) * time.Hour
			switch rapid.SampledFrom([]string{"queue", "delayed", "mod", "cancel"}).Draw(rt, "op") {
			case "queue":
				if wk.QueueWork(&dws[i].Work) != (state[i] == idle) {
					rt.Fatalf("QueueWork(%d) in state %d", i, state[i])
				}
				if state[i] == idle {
					state[i] = queued
					order = append(order, i)
				}
				continue
			case "delayed":
				if wk.QueueDelayedWork(dws[i], d) != (state[i] == idle) {
					rt.Fatalf("QueueDelayedWork(%d) in state %d", i, state[i])
				}
				if state[i] != idle {
					continue
				}
			case "mod":
				if wk.ModDelayedWork(dws[i], d) != (state[i] != idle) {
					rt.Fatalf("ModDelayedWork(%d) in state %d", i, state[i])
				}
				unqueue(i)
			case "cancel":
				if wk.CancelDelayedWorkSync(dws[i]) != (state[i] != idle) {
					rt.Fatalf("CancelDelayedWorkSync(%d) in state %d", i, state[i])
				}
				state[i] = idle
				unqueue(i)
				continue
			}
			if d == 0 {
				state[i] = queued
				order = append(order, i)
			} else {
				state[i] = armed
			}
		}
		res := make(chan error)
		go func() { res <- wk.Destroy() }()
		for !kthread.Dying(wk) {
			time.Sleep(100 * time.Microsecond)
		}
		g.open()
		err = <-res
		anyArmed := slices.Contains(state, armed)
		if anyArmed != errors.Is(err, kthread.ErrDelayedPending) || (!anyArmed && err != nil) {
			rt.Fatalf("Destroy = %v with states %v", err, state)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(ran, order) {
			rt.Fatalf("ran %v, want %v", ran, order)
		}
		for i, dw := range dws {
			if dw.Pending() || wk.FlushWork(&dw.Work) || wk.CancelDelayedWorkSync(dw) {
				rt.Fatalf("item %d busy after Destroy", i)
			}
		}
		if wk.TID() != 0 {
			rt.Fatalf("TID() = %d after Destroy", wk.TID())
		}
	})
}

// TestModelSelfCallsWhileCancelling: a running item whose cancel-sync is
// waiting makes a random sequence of calls on itself; each returns the
// kernel's answer at once (mod true and nothing queued, queue false,
// cancel false, waits ErrDeadlock), the canceller returns, and the item
// does not run again.
func TestModelSelfCallsWhileCancelling(t *testing.T) {
	errs := captureErrors(t)
	wk := newWorker(t, "kt-model-selfcancel")
	rapid.Check(t, func(rt *rapid.T) {
		calls := rapid.SliceOfN(rapid.SampledFrom([]string{
			"mod0", "mod1h", "queue", "delayed0", "delayed1h", "flush", "cancel", "cancelDelayed", "flushWorker",
		}), 1, 12).Draw(rt, "calls")
		var dw *kthread.DelayedWork
		var runs atomic.Int32
		started, release := make(chan struct{}), make(chan struct{})
		var bad []string
		dw = kthread.NewDelayedWork(func() {
			if runs.Add(1) > 1 {
				return
			}
			close(started)
			<-release
			for _, c := range calls {
				var got, want bool
				switch c {
				case "mod0", "mod1h":
					got, want = wk.ModDelayedWork(dw, map[string]time.Duration{"mod0": 0, "mod1h": time.Hour}[c]), true
				case "queue":
					got = wk.QueueWork(&dw.Work)
				case "delayed0", "delayed1h":
					got = wk.QueueDelayedWork(dw, map[string]time.Duration{"delayed0": 0, "delayed1h": time.Hour}[c])
				case "flush":
					got = wk.FlushWork(&dw.Work)
				case "cancel":
					got = wk.CancelWorkSync(&dw.Work)
				case "cancelDelayed":
					got = wk.CancelDelayedWorkSync(dw)
				case "flushWorker":
					wk.FlushWorker()
				}
				if got != want {
					bad = append(bad, c)
				}
			}
		})
		before := errs.count(kthread.ErrDeadlock)
		wk.QueueDelayedWork(dw, 0)
		<-started
		res := make(chan bool)
		go func() { res <- wk.CancelDelayedWorkSync(dw) }()
		for kthread.Canceling(&dw.Work) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		close(release)
		if <-res {
			rt.Fatal("CancelDelayedWorkSync of a running, idle item = true")
		}
		if len(bad) > 0 {
			rt.Fatalf("wrong answers from the item for %v (calls %v)", bad, calls)
		}
		wantDeadlocks := 0
		for _, c := range calls {
			if c == "flush" || c == "cancel" || c == "cancelDelayed" || c == "flushWorker" {
				wantDeadlocks++
			}
		}
		if got := errs.count(kthread.ErrDeadlock) - before; got != wantDeadlocks {
			rt.Fatalf("ErrDeadlock reported %d times, want %d", got, wantDeadlocks)
		}
		if dw.Pending() {
			rt.Fatal("pending after the cancel returned")
		}
		wk.FlushWorker()
		if runs.Load() != 1 {
			rt.Fatalf("ran %d times, want 1", runs.Load())
		}
	})
}

// TestModelCallbackEndings: items that return, panic or call
// runtime.Goexit, with a panic handler and an error handler that return,
// panic or call runtime.Goexit, in random sequences: every item runs once,
// FlushWorker returns, the worker keeps serving, and it changes thread
// exactly once per Goexit item.
func TestModelCallbackEndings(t *testing.T) {
	t.Cleanup(func() {
		kthread.SetPanicHandler(nil)
		kthread.SetErrorHandler(nil)
	})
	endings := map[string]func(){
		"return": func() {},
		"panic":  func() { panic("model") },
		"goexit": runtime.Goexit,
	}
	names := []string{"return", "panic", "goexit"}
	wk := newWorker(t, "kt-model-callbacks")
	rapid.Check(t, func(rt *rapid.T) {
		ph := rapid.SampledFrom(names).Draw(rt, "panic handler")
		eh := rapid.SampledFrom(names).Draw(rt, "error handler")
		items := rapid.SliceOfN(rapid.SampledFrom(names), 1, 8).Draw(rt, "items")
		kthread.SetPanicHandler(func(kthread.PanicInfo) { endings[ph]() })
		kthread.SetErrorHandler(func(string, string, error) { endings[eh]() })
		tids := map[int]bool{wk.TID(): true}
		runs := make([]atomic.Int32, len(items))
		goexits := 0
		for i, it := range items {
			if it == "goexit" {
				goexits++
			}
			wk.QueueWork(kthread.NewWork(func() {
				runs[i].Add(1)
				endings[it]()
			}))
		}
		done := make(chan struct{})
		go func() {
			wk.FlushWorker()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			rt.Fatalf("FlushWorker hangs (items %v, handlers %s/%s)", items, ph, eh)
		}
		for i := range runs {
			if runs[i].Load() != 1 {
				rt.Fatalf("item %d (%s) ran %d times", i, items[i], runs[i].Load())
			}
		}
		var c counter
		w := kthread.NewWork(c.fn)
		wk.QueueWork(w)
		wk.FlushWork(w)
		tids[wk.TID()] = true
		if c.n.Load() != 1 || int(c.tid.Load()) != wk.TID() {
			rt.Fatal("worker stopped serving")
		}
		if goexits == 0 && len(tids) != 1 || goexits > 0 && len(tids) != 2 {
			rt.Fatalf("threads %v with %d Goexit items", tids, goexits)
		}
	})
}
