package wq_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestErrorHandlerExitReleasesItem: a queue call that refuses an item
// reports to the error handler only after it has let the item go. A
// handler that calls runtime.Goexit (t.Fatal does) or panics must not
// leave the refused item pending: it can be queued again and flushed, and
// Destroy leaves nothing pending. Before, both cases left it pending for
// good (found by a stranger's run).
func TestErrorHandlerExitReleasesItem(t *testing.T) {
	handlers := map[string]func(op, fn string, err error){
		"goexit": func(op, fn string, err error) { runtime.Goexit() },
		"panic":  func(op, fn string, err error) { panic(err) },
	}
	for name, h := range handlers {
		t.Run("keyconflict-"+name, func(t *testing.T) {
			q, err := wq.Alloc("eh-kc-"+name, wq.Unbound, 0, wq.WithErrorHandler(h))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(q.Destroy)
			started, gate := make(chan struct{}, 1), make(chan struct{})
			w := wq.NewWork(func() {
				select {
				case started <- struct{}{}:
				default:
				}
				<-gate
			})
			if !q.QueueKeyed(1, w) {
				t.Fatal("QueueKeyed(1) = false")
			}
			<-started // w runs under key 1
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() { _ = recover() }()
				q.QueueKeyed(2, w) // ErrKeyConflict: the handler exits
			}()
			<-done
			close(gate)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := w.FlushContext(ctx); err != nil {
				t.Fatalf("Flush after the refused QueueKeyed: %v (Pending %v)", err, w.Pending())
			}
			if w.Pending() {
				t.Fatal("the refused item is still pending")
			}
		})
		t.Run("draining-"+name, func(t *testing.T) {
			q, err := wq.Alloc("eh-dr-"+name, wq.PerCPU, 0, wq.WithErrorHandler(h))
			if err != nil {
				t.Fatal(err)
			}
			started, gate := make(chan struct{}), make(chan struct{})
			q.Queue(wq.NewWork(func() { close(started); <-gate }))
			<-started
			drained := make(chan struct{})
			go func() { q.Drain(); close(drained) }()
			w := wq.NewWork(func() {})
			for { // queue from a goroutine of its own until the drain refuses w
				res, done := make(chan bool, 1), make(chan struct{})
				go func() {
					defer close(done)
					defer func() { _ = recover() }()
					res <- q.Queue(w) // refused: ErrDraining, and the handler exits
				}()
				<-done
				if ok := len(res) == 1 && <-res; ok {
					w.Flush() // queued before the drain began
					time.Sleep(time.Millisecond)
					continue
				}
				break
			}
			close(gate)
			<-drained
			q.Destroy()
			if w.Pending() {
				t.Fatal("an item refused during the drain is pending after Destroy")
			}
		})
	}
}

// TestNilItemsAndOptions: a nil item or delayed item given to any queue
// call returns false and reports ErrNoFunc, as an item without a function
// does (kthread's QueueWork already did); a nil Option is ignored. Before,
// each of these was a nil-pointer panic in the caller.
func TestNilItemsAndOptions(t *testing.T) {
	errs := captureErrors(t)
	q, err := wq.Alloc("nil-args", wq.Unbound, 0, nil)
	if err != nil {
		t.Fatalf("Alloc with a nil Option: %v", err)
	}
	defer q.Destroy()
	calls := map[string]func() bool{
		"Queue":            func() bool { return q.Queue(nil) },
		"QueueOn":          func() bool { return q.QueueOn(0, nil) },
		"QueueNode":        func() bool { return q.QueueNode(0, nil) },
		"QueueKeyed":       func() bool { return q.QueueKeyed(1, nil) },
		"QueueKeyedString": func() bool { return q.QueueKeyedString("k", nil) },
		"QueueDelayed":     func() bool { return q.QueueDelayed(nil, time.Millisecond) },
		"QueueDelayedOn":   func() bool { return q.QueueDelayedOn(0, nil, time.Millisecond) },
		"ModDelayed":       func() bool { return q.ModDelayed(nil, time.Millisecond) },
		"ModDelayedOn":     func() bool { return q.ModDelayedOn(0, nil, time.Millisecond) },
	}
	for name, call := range calls {
		before := errs.count(wq.ErrNoFunc)
		var got bool
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil) panicked: %v", name, r)
				}
			}()
			got = call()
		}()
		if got {
			t.Errorf("%s(nil) = true", name)
		}
		if errs.count(wq.ErrNoFunc) != before+1 {
			t.Errorf("%s(nil) did not report ErrNoFunc", name)
		}
	}
}
