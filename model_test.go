package wq_test

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/gowq/wq"
)

// The model-based test drives two work items and one delayed work item on
// an ordered workqueue through random sequences of queue, cancel, disable,
// enable, flush, mod-delayed and "let the running item finish", and checks
// every return value and state against a small reference model of the
// kernel's semantics. Each item's function signals that it started and
// then blocks until the test releases it, so every interleaving is
// deterministic: on an ordered queue the head of the queue starts exactly
// when the running item finishes.

type modelItem struct {
	pending  bool // queued (in fifo) or timer armed
	armed    bool // delayed item: timer armed, not in fifo
	disabled int
	runs     int // completed runs
}

type model struct {
	items   []modelItem
	fifo    []int // queued item indexes, in order
	running int   // -1 none
}

func (m *model) remove(i int) {
	if k := slices.Index(m.fifo, i); k >= 0 {
		m.fifo = slices.Delete(m.fifo, k, k+1)
	}
}

type harness struct {
	t       *rapid.T
	q       *wq.Workqueue
	works   []*wq.Work // 0, 1 plain; 2 is &dw.Work
	dw      *wq.DelayedWork
	started []chan struct{}
	gate    []chan struct{}
	done    []chan struct{}
	m       model
}

// sync waits for the item the model says must start now, if any.
func (h *harness) sync() {
	if h.m.running >= 0 || len(h.m.fifo) == 0 {
		return
	}
	next := h.m.fifo[0]
	select {
	case <-h.started[next]:
	case <-time.After(2 * time.Second):
		h.t.Fatalf("item %d should have started (fifo %v)", next, h.m.fifo)
	}
	h.m.fifo = h.m.fifo[1:]
	h.m.running = next
	h.m.items[next].pending = false
}

func (h *harness) check(what string, got, want bool) {
	if got != want {
		h.t.Fatalf("%s = %v, model says %v (model %+v)", what, got, want, h.m)
	}
}

func TestModelStateMachine(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q, err := wq.AllocOrdered("model", 0)
		if err != nil {
			rt.Fatal(err)
		}
		h := &harness{t: rt, q: q, m: model{items: make([]modelItem, 3), running: -1}}
		for i := 0; i < 3; i++ {
			h.started = append(h.started, make(chan struct{}))
			h.gate = append(h.gate, make(chan struct{}))
			h.done = append(h.done, make(chan struct{}, 1))
		}
		fn := func(i int) func() {
			return func() {
				h.started[i] <- struct{}{}
				<-h.gate[i]
				h.done[i] <- struct{}{}
			}
		}
		h.works = []*wq.Work{wq.NewWork(fn(0)), wq.NewWork(fn(1))}
		h.dw = wq.NewDelayedWork(fn(2))
		h.works = append(h.works, &h.dw.Work)
		failed := true
		defer func() {
			if failed {
				return // the model is off; leave the queue (the test fails anyway)
			}
			// Drain: cancel the delayed item, let everything run out.
			if h.dw.Cancel() {
				h.m.remove(2)
				h.m.items[2].pending, h.m.items[2].armed = false, false
			}
			for h.m.running >= 0 || len(h.m.fifo) > 0 {
				h.release()
			}
			q.Destroy()
		}()

		ops := rapid.IntRange(10, 60).Draw(rt, "ops")
		for n := 0; n < ops; n++ {
			i := rapid.IntRange(0, 2).Draw(rt, "item")
			w := h.works[i]
			it := &h.m.items[i]
			switch op := rapid.SampledFrom([]string{"queue", "queue", "cancel", "cancelsync", "disable", "enable", "flush", "pending", "release", "release", "delayed", "mod"}).Draw(rt, "op"); op {
			case "queue":
				want := !it.pending && it.disabled == 0
				h.check("Queue", q.Queue(w), want)
				if want {
					it.pending = true
					h.m.fifo = append(h.m.fifo, i)
				}
			case "cancel", "cancelsync":
				if op == "cancelsync" && h.m.running == i {
					continue // would wait for the test itself to release it
				}
				want := it.pending
				var got bool
				if op == "cancelsync" {
					got = w.CancelSync()
				} else {
					got = w.Cancel()
				}
				h.check(op, got, want)
				it.pending, it.armed = false, false
				h.m.remove(i)
			case "disable":
				if h.m.running == i && rapid.Bool().Draw(rt, "sync") {
					continue
				}
				want := it.pending
				h.check("Disable", w.Disable(), want)
				it.pending, it.armed = false, false
				h.m.remove(i)
				it.disabled++
			case "enable":
				if it.disabled == 0 {
					continue // reports an error by design; covered elsewhere
				}
				it.disabled--
				h.check("Enable", w.Enable(), it.disabled == 0)
			case "flush":
				if it.pending || h.m.running == i {
					continue // would wait for a release
				}
				h.check("Flush", w.Flush(), false)
			case "pending":
				h.check("Pending", w.Pending(), it.pending)
				h.check("Busy&Running", w.Busy()&wq.BusyRunning != 0, h.m.running == i)
			case "release":
				h.release()
			case "delayed":
				if i != 2 {
					continue
				}
				want := !it.pending && it.disabled == 0
				h.check("QueueDelayed", q.QueueDelayed(h.dw, time.Hour), want)
				if want {
					it.pending, it.armed = true, true
				}
			case "mod":
				if i != 2 {
					continue
				}
				want := it.pending
				h.check("ModDelayed", q.ModDelayed(h.dw, time.Hour), want)
				h.m.remove(2)
				if it.disabled == 0 {
					it.pending, it.armed = true, true
				} else {
					it.pending, it.armed = false, false
				}
			}
			h.sync()
		}
		for i, w := range h.works {
			if w.Pending() != h.m.items[i].pending {
				rt.Fatalf("item %d Pending() = %v, model %v", i, w.Pending(), h.m.items[i].pending)
			}
		}
		failed = false
	})

}

// release lets the running item finish and waits until it has.
func (h *harness) release() {
	r := h.m.running
	if r < 0 {
		h.sync()
		return
	}
	select {
	case h.gate[r] <- struct{}{}:
	case <-time.After(2 * time.Second):
		h.t.Fatalf("item %d, running per the model, does not wait for release (model %+v)", r, h.m)
	}
	<-h.done[r]
	// Wait until its bookkeeping is done (Flush would also wait for a
	// requeued instance, which blocks until the test receives its start).
	// If r itself is next (requeued while it ran), its next instance starts
	// at once and sync receives that start instead.
	deadline := time.Now().Add(2 * time.Second)
	for !(len(h.m.fifo) > 0 && h.m.fifo[0] == r) && h.works[r].Busy()&wq.BusyRunning != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("item %d still running after its release", r)
		}
		time.Sleep(20 * time.Microsecond)
	}
	h.m.items[r].runs++
	h.m.running = -1
	h.sync()
}
