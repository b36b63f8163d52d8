package kthread_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gowq/wq/kthread"
)

// TestPanicHandlerContained: a panic handler that calls runtime.Goexit,
// panics, or waits on its own worker cannot kill the worker, leave the
// item marked running, or hang: FlushWork returns, the item can be queued
// again, the worker keeps its thread and serves the next item.
func TestPanicHandlerContained(t *testing.T) {
	errs := captureErrors(t)
	var wk *kthread.Worker
	var calls atomic.Int32
	handlers := []struct {
		name     string
		h        func(kthread.PanicInfo)
		deadlock int // ErrDeadlock reports it causes
	}{
		{"goexit", func(kthread.PanicInfo) { runtime.Goexit() }, 0},
		{"panic", func(kthread.PanicInfo) { panic("handler panicked") }, 0},
		{"panic-nil", func(kthread.PanicInfo) { panic(nil) }, 0},
		{"flush-worker", func(kthread.PanicInfo) { wk.FlushWorker() }, 1},
		{"destroy", func(kthread.PanicInfo) {
			if err := wk.Destroy(); !errors.Is(err, kthread.ErrDeadlock) {
				panic("Destroy from the panic handler: " + err.Error())
			}
		}, 1},
		{"destroy-then-goexit", func(kthread.PanicInfo) { _ = wk.Destroy(); runtime.Goexit() }, 1},
	}
	t.Cleanup(func() { kthread.SetPanicHandler(nil) })
	wantDeadlocks := 0
	for _, c := range handlers {
		wk = newWorker(t, "kt-ph-"+c.name)
		tid := wk.TID()
		kthread.SetPanicHandler(func(pi kthread.PanicInfo) {
			calls.Add(1)
			c.h(pi)
		})
		var runs atomic.Int32
		p := kthread.NewWork(func() {
			runs.Add(1)
			panic("item panicked")
		})
		for round := range 2 {
			if !wk.QueueWork(p) {
				t.Fatalf("%s: QueueWork of the panicking item = false (round %d)", c.name, round)
			}
			within(t, c.name+": FlushWork", func() { wk.FlushWork(p) })
		}
		if p.Pending() {
			t.Errorf("%s: item still pending", c.name)
		}
		var cnt counter
		within(t, c.name+": the next item", func() {
			w := kthread.NewWork(cnt.fn)
			wk.QueueWork(w)
			wk.FlushWork(w)
		})
		if cnt.n.Load() != 1 || runs.Load() != 2 {
			t.Errorf("%s: next item ran %d times, panicking item %d; want 1, 2", c.name, cnt.n.Load(), runs.Load())
		}
		if got := wk.TID(); got != tid || int(cnt.tid.Load()) != tid {
			t.Errorf("%s: worker thread %d -> %d: a handler must not cost the worker its thread", c.name, tid, got)
		}
		wantDeadlocks += 2 * c.deadlock
	}
	if got := calls.Load(); got != int32(2*len(handlers)) {
		t.Errorf("panic handler called %d times, want %d", got, 2*len(handlers))
	}
	if got := errs.count(kthread.ErrDeadlock); got != wantDeadlocks {
		t.Errorf("ErrDeadlock reported %d times, want %d: %v", got, wantDeadlocks, errs.all())
	}
	if got := errs.count(kthread.ErrGoexit); got != 0 {
		t.Errorf("ErrGoexit reported %d times: a handler's Goexit is not the item's: %v", got, errs.all())
	}
}

// TestErrorHandlerContained: an error handler that calls runtime.Goexit,
// panics or waits on the worker, called from a work function (ErrDeadlock),
// from the worker's loop (ErrGoexit) or from an ordinary goroutine
// (ErrDestroyed, ErrNoFunc), ends only its own helper goroutine: the
// caller carries on.
func TestErrorHandlerContained(t *testing.T) {
	var wk *kthread.Worker
	var calls atomic.Int32
	for _, c := range []struct {
		name string
		h    func()
	}{
		{"goexit", runtime.Goexit},
		{"panic", func() { panic("error handler panicked") }},
		{"flush-worker", func() { wk.FlushWorker() }},
		{"destroy", func() { _ = wk.Destroy() }},
	} {
		kthread.SetErrorHandler(func(op, fn string, err error) {
			calls.Add(1)
			c.h()
		})
		wk = newWorker(t, "kt-eh-"+c.name)
		tid := wk.TID()
		// From inside an item: the item goes on after the report.
		var after atomic.Int32
		var w *kthread.Work
		w = kthread.NewWork(func() {
			wk.FlushWork(w) // ErrDeadlock
			after.Add(1)
			wk.FlushWorker() // ErrDeadlock
			after.Add(1)
		})
		wk.QueueWork(w)
		within(t, c.name+": FlushWork", func() { wk.FlushWork(w) })
		if after.Load() != 2 {
			t.Errorf("%s: the item stopped at the report (%d of 2 steps)", c.name, after.Load())
		}
		if wk.TID() != tid {
			t.Errorf("%s: the worker lost its thread to the error handler", c.name)
		}
		// From the loop, after a Goexit item: the replacement serves.
		x := kthread.NewWork(runtime.Goexit)
		wk.QueueWork(x)
		within(t, c.name+": FlushWork after Goexit", func() { wk.FlushWork(x) })
		var cnt counter
		within(t, c.name+": the next item", func() {
			y := kthread.NewWork(cnt.fn)
			wk.QueueWork(y)
			wk.FlushWork(y)
		})
		if cnt.n.Load() != 1 {
			t.Errorf("%s: worker stopped serving", c.name)
		}
		// From an ordinary goroutine.
		within(t, c.name+": QueueWork(nil)", func() {
			if wk.QueueWork(&kthread.Work{}) {
				t.Errorf("%s: QueueWork(zero Work) = true", c.name)
			}
		})
	}
	kthread.SetErrorHandler(nil)
	if got := calls.Load(); got != 4*4 {
		t.Errorf("error handler called %d times, want 16", got)
	}
}

// panickyHandler is a log/slog handler that panics or calls Goexit.
type panickyHandler struct{ goexit bool }

func (h panickyHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h panickyHandler) Handle(context.Context, slog.Record) error {
	if h.goexit {
		runtime.Goexit()
	}
	panic("slog handler panicked")
}
func (h panickyHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h panickyHandler) WithGroup(string) slog.Handler      { return h }

// TestSlogDefaultContained: with no handler set, reports go to log/slog,
// whose handler is user code too; it is contained the same way.
func TestSlogDefaultContained(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	for _, goexit := range []bool{false, true} {
		slog.SetDefault(slog.New(panickyHandler{goexit: goexit}))
		wk := newWorker(t, "kt-slog")
		p := kthread.NewWork(func() { panic("item panicked") })
		x := kthread.NewWork(runtime.Goexit)
		var cnt counter
		c := kthread.NewWork(cnt.fn)
		within(t, "the worker", func() {
			wk.QueueWork(p)
			wk.QueueWork(x)
			wk.QueueWork(c)
			wk.FlushWork(c)
		})
		if cnt.n.Load() != 1 {
			t.Errorf("goexit=%v: worker stopped", goexit)
		}
	}
}

func TestPanicRecovered(t *testing.T) {
	var got []kthread.PanicInfo
	var mu sync.Mutex
	kthread.SetPanicHandler(func(pi kthread.PanicInfo) {
		mu.Lock()
		got = append(got, pi)
		mu.Unlock()
	})
	t.Cleanup(func() { kthread.SetPanicHandler(nil) })
	wk := newWorker(t, "kt-panic")
	p := kthread.NewWork(func() { panic("boom") })
	var c counter
	wk.QueueWork(p)
	wk.QueueWork(kthread.NewWork(c.fn))
	wk.FlushWorker()
	if c.n.Load() != 1 {
		t.Fatal("worker stopped after a panic")
	}
	mu.Lock()
	infos := slices.Clone(got)
	mu.Unlock()
	if len(infos) != 1 {
		t.Fatalf("panic handler called %d times, want 1", len(infos))
	}
	pi := infos[0]
	if pi.Value != "boom" || pi.Worker != "kt-panic" || !strings.Contains(pi.Func, "TestPanicRecovered") || len(pi.Stack) == 0 {
		t.Errorf("PanicInfo = %+v", pi)
	}
	if !wk.QueueWork(p) {
		t.Error("panicked item cannot be queued again")
	}
	wk.FlushWorker()
}
