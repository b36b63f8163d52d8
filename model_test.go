package wq_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"pgregory.net/rapid"
)

// The model-based test drives two work items and one delayed work item
// through random sequences of operations and checks every return value and
// state against a small reference model of the kernel's semantics.
//
// Each item's function signals that it started and then serves commands
// from the test until told to end: the test makes it call an operation on
// itself (a self-call) and reports the result, or makes it return, call
// runtime.Goexit, or panic (after which the panic handler returns, calls
// runtime.Goexit or panics itself). The queue runs one item at a time in
// queue order (an ordered queue, or a per-CPU queue with max_active 1 fed
// on CPU 0 only), so the head of the queue starts exactly when the running
// item ends and every interleaving is deterministic.
//
// Covered: queue, queue-delayed (1 h, or 1 ms while another item runs so
// that the firing is observable), mod-delayed (1 h / 1 ms), cancel,
// disable, enable, flush, cancel-sync and disable-sync; a cancel-sync,
// disable-sync or flush of the running item is called from another
// goroutine and waits (a sync canceller holds the item meanwhile: every
// grab is refused). Self-calls (queue, delayed, mod, cancel, cancel-sync,
// disable, disable-sync, enable, flush) with and without cancellers
// waiting. Runs that end by returning, runtime.Goexit, or a panic whose
// handler returns, calls runtime.Goexit or panics. Destroy as the final
// step, with the delayed item and up to three more armed (cancelled,
// idle, reported), then the delayed item on a new queue. Variants: an
// ordered queue, a per-CPU queue with max_active 1, and both with
// MemReclaim and worker creation failing always or by a pattern (the
// rescuer and the retried creations run the items). Reports to the error
// and panic handlers (ErrDeadlock, ErrDelayedPending, ErrDestroyed,
// ErrWorkerExit, panics) are counted and checked too. The long mode is
// TestModelLong.

// modelOps counts the operations executed by all model runs (long mode).
var modelOps atomic.Int64

// modelStats counts what the model runs exercised (logged by the tests).
var modelStats = map[string]int64{}

func modelStat(what string) { modelStats[what]++ }

// logModelStats logs the counts gathered since before (a copy).
func logModelStats(t *testing.T, before map[string]int64) {
	keys := make([]string, 0, len(modelStats))
	for k := range modelStats {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if n := modelStats[k] - before[k]; n > 0 {
			fmt.Fprintf(&b, "\n  %-48s %d", k, n)
		}
	}
	t.Logf("exercised:%s", b.String())
}

// modelDeadline bounds every wait for something that must happen. It
// detects hangs, not slowness: the suite runs beside the lab's tests,
// whose nice -20 hogs leave a per-CPU worker a few percent of its CPU.
const modelDeadline = 30 * time.Second

var errModelNoThread = errors.New("model: injected worker creation failure")

type modelItem struct {
	pending  bool // queued (in fifo) or timer armed
	armed    bool // delayed item: timer armed, not in fifo
	disabled int
	runs     int // completed runs
	held     int // sync cancellers waiting for the running instance
}

// waiter is a CancelSync, DisableSync or Flush of the running item, called
// from its own goroutine; it returns when the item ends.
type waiter struct {
	item int
	op   string
	want bool
	res  chan bool
}

// How a run ends, and what the panic handler does then.
const (
	endReturn = iota
	endGoexit
	endPanic       // the panic handler returns
	endPanicGoexit // the panic handler calls runtime.Goexit
	endPanicPanic  // the panic handler panics
	nEnds
)

var endNames = [nEnds]string{"return", "goexit", "panic", "panic+handler-goexit", "panic+handler-panic"}

type model struct {
	items   []modelItem
	fifo    []int    // queued item indexes, in order
	running int      // -1 none
	waiting []waiter // calls waiting for the running item to end

	deadlocks int        // ErrDeadlock reports
	exits     int        // ErrWorkerExit reports (a Goexit on a worker)
	panics    [nEnds]int // panic handler calls, by what it does
	ends      [nEnds]int // runs ended, by how
}

func (m *model) remove(i int) {
	if k := slices.Index(m.fifo, i); k >= 0 {
		m.fifo = slices.Delete(m.fifo, k, k+1)
	}
}

// Worker creation in a variant.
const (
	createWorks = iota
	createFailsAll
	createFailsSome
)

type modelVariant struct {
	name    string
	flags   wq.Flags
	ordered bool // AllocOrdered; otherwise Alloc(flags, 1) with everything on CPU 0
	create  int
}

var (
	plainVariants = []modelVariant{
		{"ordered", 0, true, createWorks},
		{"percpu-1", wq.PerCPU, false, createWorks},
	}
	rescuerVariants = []modelVariant{
		{"ordered-reclaim-nocreate", wq.MemReclaim, true, createFailsAll},
		{"percpu-1-reclaim-nocreate", wq.PerCPU | wq.MemReclaim, false, createFailsAll},
		{"ordered-reclaim-somecreate", wq.MemReclaim, true, createFailsSome},
		{"percpu-1-reclaim-somecreate", wq.PerCPU | wq.MemReclaim, false, createFailsSome},
	}
	// RT queues: their delayed item is timed by the RT timer thread
	// (internal/timer's RT base), not by a Go timer.
	rtTimerVariants = []modelVariant{
		{"ordered-rt", wq.RT, true, createWorks},
		{"percpu-1-rt", wq.PerCPU | wq.RT, false, createWorks},
	}
	// escapeVariants are per-CPU queues with escape_after (escape.go,
	// variantEscape): items escape whenever the pool's worker is late;
	// with no worker creatable, the escaper runs every instance.
	escapeVariants = []modelVariant{
		{"percpu-1-escape", wq.PerCPU, false, createWorks},
		{"percpu-1-escape-nocreate", wq.PerCPU, false, createFailsAll},
	}
	variantEscape = map[string]time.Duration{
		"percpu-1-escape":          20 * time.Microsecond,
		"percpu-1-escape-nocreate": 20 * time.Microsecond,
	}
)

// allocOpts are the Alloc options of a variant.
func (v modelVariant) allocOpts() []wq.Option {
	if d := variantEscape[v.name]; d > 0 {
		return []wq.Option{wq.WithEscapeAfter(d)}
	}
	return nil
}

// cmd is an order to the running item's function.
type cmd struct {
	end   int         // how to end, when call is nil
	call  func() bool // a self-call
	reply chan bool
}

type modelPanic struct{ then int }

type harness struct {
	preWorkers bool // a normal-class pool had workers before the queue was made
	t          *rapid.T
	v          modelVariant
	q          *wq.Workqueue
	works      []*wq.Work // 0, 1 plain; 2 is &dw.Work
	dw         *wq.DelayedWork
	started    []chan struct{}
	cmd        []chan cmd
	done       []chan struct{}
	starts     []atomic.Int64 // instances started, counted before they report
	abort      chan struct{}  // closed (stop) on failure and at the end: functions return
	stopped    sync.Once
	m          model

	// Reports to the handlers.
	nDeadlock, nExit, nDestroyed, nDelayedPending atomic.Int64
	nPanic                                        [nEnds]atomic.Int64
	mu                                            sync.Mutex
	other                                         []string // unexpected reports
	delayedPendingMsg                             string
}

func (h *harness) unexpected(s string) {
	h.mu.Lock()
	h.other = append(h.other, s)
	h.mu.Unlock()
}

func (h *harness) fn(i int) func() {
	return func() {
		h.starts[i].Add(1)
		select {
		case h.started[i] <- struct{}{}:
		case <-h.abort:
			return
		}
		for {
			var c cmd
			select {
			case c = <-h.cmd[i]:
			case <-h.abort:
				return
			}
			if c.call != nil {
				c.reply <- c.call()
				continue
			}
			h.done[i] <- struct{}{}
			switch c.end {
			case endGoexit:
				runtime.Goexit()
			case endPanic, endPanicGoexit, endPanicPanic:
				panic(modelPanic{then: c.end})
			}
			return
		}
	}
}

// The queue operations of the variant.
func (h *harness) queue(w *wq.Work) bool {
	if h.v.ordered {
		return h.q.Queue(w)
	}
	return h.q.QueueOn(0, w)
}

func (h *harness) queueErr(w *wq.Work) (bool, error) {
	if h.v.ordered {
		return h.q.QueueErr(w)
	}
	return h.q.QueueOnErr(0, w)
}

func (h *harness) queueDelayed(d time.Duration) bool {
	if h.v.ordered {
		return h.q.QueueDelayed(h.dw, d)
	}
	return h.q.QueueDelayedOn(0, h.dw, d)
}

func (h *harness) modDelayed(d time.Duration) bool {
	if h.v.ordered {
		return h.q.ModDelayed(h.dw, d)
	}
	return h.q.ModDelayedOn(0, h.dw, d)
}

// The model's transitions. Each returns the model's answer and applies it.

// mQueue: Queue (armed false) or QueueDelayed (armed true; short: the timer
// fires at once, see waitFired).
func (h *harness) mQueue(i int, delayed, short bool) bool {
	it := &h.m.items[i]
	if it.held > 0 || it.pending || it.disabled > 0 {
		return false
	}
	it.pending = true
	if delayed && !short {
		it.armed = true
	} else {
		h.m.fifo = append(h.m.fifo, i)
	}
	return true
}

// mQueueErr: QueueErr. A held item has CANCELING, not PENDING: disabled
// for the wait; a pending one is the dedup (no error).
func (h *harness) mQueueErr(i int) (bool, error) {
	it := &h.m.items[i]
	switch {
	case it.held > 0:
		return false, wq.ErrDisabled
	case it.pending:
		return false, nil
	case it.disabled > 0:
		return false, wq.ErrDisabled
	}
	return h.mQueue(i, false, false), nil
}

// mMod: ModDelayed of the delayed item.
func (h *harness) mMod(short bool) bool {
	it := &h.m.items[2]
	if it.held > 0 {
		return true // the canceller wins; nothing is queued
	}
	was := it.pending
	h.m.remove(2)
	it.pending, it.armed = false, false
	if it.disabled == 0 {
		it.pending = true
		if short {
			h.m.fifo = append(h.m.fifo, 2)
		} else {
			it.armed = true
		}
	}
	return was
}

// mCancel: Cancel, and the cancelling part of every other cancel.
func (h *harness) mCancel(i int) bool {
	it := &h.m.items[i]
	if it.held > 0 {
		return false
	}
	was := it.pending
	h.m.remove(i)
	it.pending, it.armed = false, false
	return was
}

func (h *harness) mDisable(i int) bool {
	h.m.items[i].disabled++
	return h.mCancel(i)
}

// waitFired waits until the delayed item, armed for 1 ms while another
// item runs (so that it cannot start), has fired and is linked on the
// queue: only then is its place in the queue order fixed.
func (h *harness) waitFired() {
	h.waitUntil("the 1 ms timer of the delayed item to fire and link it", func() bool {
		return !h.dw.Armed() && h.dw.Linked()
	})
}

func (h *harness) waitUntil(what string, cond func() bool) {
	deadline := time.Now().Add(modelDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s (model %+v)", what, h.m)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// sync waits for the item the model says must start now, if any.
func (h *harness) sync() {
	if h.m.running >= 0 || len(h.m.fifo) == 0 {
		return
	}
	next := h.m.fifo[0]
	got := -1
	select {
	case <-h.started[0]:
		got = 0
	case <-h.started[1]:
		got = 1
	case <-h.started[2]:
		got = 2
	case <-time.After(modelDeadline):
		h.t.Fatalf("item %d should have started (fifo %v, model %+v)", next, h.m.fifo, h.m)
	}
	if got != next {
		h.t.Fatalf("item %d started, the model says item %d (model %+v)", got, next, h.m)
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

func (h *harness) checkInt(what string, got, want int) {
	if got != want {
		h.t.Fatalf("%s = %d, model says %d (model %+v)", what, got, want, h.m)
	}
}

// checkItem compares everything observable about item i with the model.
func (h *harness) checkItem(i int) {
	w, it := h.works[i], &h.m.items[i]
	h.check(fmt.Sprintf("item %d Pending", i), w.Pending(), it.pending)
	h.check(fmt.Sprintf("item %d Busy&Running", i), w.Busy()&wq.BusyRunning != 0, h.m.running == i)
	h.checkInt(fmt.Sprintf("item %d disable depth", i), w.DisableDepth(), it.disabled)
	h.check(fmt.Sprintf("item %d Disabled", i), w.Disabled(), it.disabled > 0)
	h.checkInt(fmt.Sprintf("item %d cancellers", i), w.Cancelers(), it.held)
	h.check(fmt.Sprintf("item %d held", i), w.Held(), it.held > 0)
	waiters := 0
	if h.m.running == i {
		waiters = len(h.m.waiting)
	}
	h.checkInt(fmt.Sprintf("item %d waiters", i), w.FlushWaiters(), waiters)
	if i == 2 {
		h.check("delayed item Armed", h.dw.Armed(), it.armed)
	}
	started := it.runs
	if h.m.running == i {
		started++
	}
	h.checkInt(fmt.Sprintf("item %d instances started", i), int(h.starts[i].Load()), started)
}

// send gives the running item r a command.
func (h *harness) send(r int, c cmd) {
	select {
	case h.cmd[r] <- c:
	case <-time.After(modelDeadline):
		h.t.Fatalf("item %d, running per the model, takes no command (model %+v)", r, h.m)
	}
}

// self makes the running item call op on itself and returns the result.
func (h *harness) self(op string, call func() bool) bool {
	r := h.m.running
	reply := make(chan bool, 1)
	h.send(r, cmd{call: call, reply: reply})
	select {
	case v := <-reply:
		return v
	case <-time.After(modelDeadline):
		h.t.Fatalf("self-call %s from item %d hangs (model %+v)", op, r, h.m)
		return false
	}
}

// syncCancel calls CancelSync or DisableSync of the running item i from a
// new goroutine and waits until it holds the item.
func (h *harness) syncCancel(i int, disable bool) {
	it := &h.m.items[i]
	op := "CancelSync"
	if disable {
		op = "DisableSync"
		it.disabled++
	}
	want := h.mCancel(i) // false when another canceller holds it already
	it.held++
	modelStat(fmt.Sprintf("%s of the running item (holder %d)", op, it.held))
	c := waiter{item: i, op: op, want: want, res: make(chan bool, 1)}
	h.m.waiting = append(h.m.waiting, c)
	w := h.works[i]
	go func() {
		if disable {
			c.res <- w.DisableSync()
		} else {
			c.res <- w.CancelSync()
		}
	}()
	h.waitUntil(fmt.Sprintf("%s of running item %d to hold it", op, i), func() bool {
		select {
		case v := <-c.res:
			h.t.Fatalf("%s of running item %d returned %v before the item ended (model %+v)", op, i, v, h.m)
		default:
		}
		return w.Cancelers() == it.held && w.DisableDepth() == it.disabled && w.FlushWaiters() == len(h.m.waiting)
	})
}

// asyncFlush calls Flush of the running, not pending, item i from a new
// goroutine and waits until it waits: it returns true when the running
// instance ends, also while a sync canceller holds the item.
func (h *harness) asyncFlush(i int) {
	c := waiter{item: i, op: "Flush", want: true, res: make(chan bool, 1)}
	h.m.waiting = append(h.m.waiting, c)
	go func() {
		if i == 2 {
			c.res <- h.dw.Flush()
		} else {
			c.res <- h.works[i].Flush()
		}
	}()
	h.waitUntil(fmt.Sprintf("Flush of running item %d to wait", i), func() bool {
		select {
		case v := <-c.res:
			h.t.Fatalf("Flush of running item %d returned %v before the item ended (model %+v)", i, v, h.m)
		default:
		}
		return h.works[i].FlushWaiters() == len(h.m.waiting)
	})
	modelStat("flush of the running item")
}

// release ends the running item the way end says and waits until it has
// ended, and for the cancellers that waited for it.
func (h *harness) release(end int) {
	r := h.m.running
	if r < 0 {
		h.sync()
		return
	}
	h.send(r, cmd{end: end})
	select {
	case <-h.done[r]:
	case <-time.After(modelDeadline):
		h.t.Fatalf("item %d did not end", r)
	}
	it := &h.m.items[r]
	// Wait until its bookkeeping is done (Flush would also wait for a
	// requeued instance, which blocks until the test receives its start).
	// If r itself is next (requeued while it ran), its next instance starts
	// at once and sync receives that start instead.
	h.waitUntil(fmt.Sprintf("item %d to stop running after it ended (%s)", r, endNames[end]), func() bool {
		return (len(h.m.fifo) > 0 && h.m.fifo[0] == r) || h.works[r].Busy()&wq.BusyRunning == 0
	})
	held := it.held > 0
	if held {
		modelStat("end " + endNames[end] + " while held")
	} else {
		modelStat("end " + endNames[end])
	}
	for _, c := range h.m.waiting {
		select {
		case got := <-c.res:
			h.check(fmt.Sprintf("%s of item %d (returned after the item ended)", c.op, c.item), got, c.want)
		case <-time.After(modelDeadline):
			h.t.Fatalf("%s of item %d still waits after the item ended (%s) (model %+v)", c.op, c.item, endNames[end], h.m)
		}
	}
	h.m.waiting = nil
	it.held = 0
	it.runs++
	h.m.running = -1
	h.m.ends[end]++
	switch end {
	case endGoexit, endPanicGoexit:
		h.m.exits++
	}
	if end >= endPanic {
		h.m.panics[end]++
	}
	if held {
		// The cancellers won: the item is idle and runs no more (a re-arm
		// or requeue that slipped past them would show here).
		h.check(fmt.Sprintf("item %d Pending after its sync cancellers returned", r), h.works[r].Pending(), false)
		if r == 2 {
			h.check("delayed item Armed after its sync cancellers returned", h.dw.Armed(), false)
		}
	}
	h.sync()
}

// drawEnd picks how the running item ends: mostly a return.
func drawEnd(rt *rapid.T) int {
	return rapid.SampledFrom([]int{endReturn, endReturn, endReturn, endReturn, endGoexit, endPanic, endPanicGoexit, endPanicPanic}).Draw(rt, "end")
}

var modelOpNames = []string{
	"queue", "queue", "queueerr", "cancel", "cancelsync", "disablesync", "disable", "enable", "flush", "check",
	"release", "release", "delayed", "delayed-1ms", "mod", "mod-1ms", "self", "self", "self",
}

// runModel is one model run: a fresh queue of variant v, 10..maxOps random
// operations, then either a drain or a Destroy with whatever is armed.
func runModel(rt *rapid.T, v modelVariant, maxOps int) {
	modelRuns++
	// Every worker exit is reported (the model counts them exactly).
	defer wq.SetExitReportEvery(time.Nanosecond)()
	h := &harness{t: rt, v: v, m: model{items: make([]modelItem, 3), running: -1}, abort: make(chan struct{})}
	h.starts = make([]atomic.Int64, 3)
	for i := 0; i < 3; i++ {
		h.started = append(h.started, make(chan struct{}))
		h.cmd = append(h.cmd, make(chan cmd))
		h.done = append(h.done, make(chan struct{}, 1))
	}
	wq.SetErrorHandler(func(op, fn string, err error) {
		switch {
		case op == "create_worker":
			// The injected failures (and a class warning when niced):
			// asynchronous and rate-limited; not modelled.
		case errors.Is(err, wq.ErrDeadlock):
			h.nDeadlock.Add(1)
		case errors.Is(err, wq.ErrWorkerExit):
			h.nExit.Add(1)
		case errors.Is(err, wq.ErrDestroyed):
			h.nDestroyed.Add(1)
		case errors.Is(err, wq.ErrDelayedPending):
			h.nDelayedPending.Add(1)
			h.mu.Lock()
			h.delayedPendingMsg = err.Error()
			h.mu.Unlock()
		default:
			h.unexpected(fmt.Sprintf("error handler: %s %s: %v", op, fn, err))
		}
	})
	defer wq.SetErrorHandler(nil)
	wq.SetPanicHandler(func(pi wq.PanicInfo) {
		mp, ok := pi.Value.(modelPanic)
		if !ok {
			h.unexpected(fmt.Sprintf("panic handler: %v", pi.Value))
			return
		}
		h.nPanic[mp.then].Add(1)
		switch mp.then {
		case endPanicGoexit:
			runtime.Goexit()
		case endPanicPanic:
			panic("model: the panic handler panics")
		}
	})
	defer wq.SetPanicHandler(nil)
	switch v.create {
	case createFailsAll:
		wq.SetCreateWorkerHook(func() error { return errModelNoThread })
		defer wq.SetCreateWorkerHook(nil)
	case createFailsSome:
		// Bit k of pattern: creation number k (mod 8) fails.
		pattern := rapid.Uint8Range(1, 254).Draw(rt, "create-fail-pattern")
		var n atomic.Uint32
		wq.SetCreateWorkerHook(func() error {
			if pattern>>(n.Add(1)%8)&1 != 0 {
				return errModelNoThread
			}
			return nil
		})
		defer wq.SetCreateWorkerHook(nil)
	}

	var err error
	if v.ordered {
		h.q, err = wq.AllocOrdered("model", v.flags)
	} else {
		h.q, err = wq.Alloc("model", v.flags, 1, v.allocOpts()...)
	}
	if err != nil {
		rt.Fatal(err)
	}
	// Pools are shared by class: a per-CPU pool that another test left
	// alive (a system queue, once used, keeps its pools) may still have
	// idle workers, which run items though no worker can be created.
	for _, pi := range wq.Pools() {
		if len(pi.Workers) > 0 && pi.Policy == "SCHED_OTHER" && pi.Nice == 0 {
			h.preWorkers = true
		}
	}
	h.works = []*wq.Work{wq.NewWork(h.fn(0)), wq.NewWork(h.fn(1))}
	h.dw = wq.NewDelayedWork(h.fn(2))
	h.works = append(h.works, &h.dw.Work)
	failed := true
	defer func() {
		if !failed {
			return
		}
		// The model is off: let every function return, so that the
		// cancellers and Destroy can finish (the test fails anyway).
		h.stop()
		destroyed := make(chan struct{})
		q := h.q
		go func() { q.Destroy(); close(destroyed) }()
		select {
		case <-destroyed:
		case <-time.After(modelDeadline):
			rt.Logf("Destroy hangs after the failure:\n%s", q.DumpState())
		}
	}()

	ops := rapid.IntRange(10, maxOps).Draw(rt, "ops")
	for n := 0; n < ops; n++ {
		i := rapid.IntRange(0, 2).Draw(rt, "item")
		w := h.works[i]
		it := &h.m.items[i]
		op := rapid.SampledFrom(modelOpNames).Draw(rt, "op")
		switch op {
		case "queue":
			h.check("Queue", h.queue(w), h.mQueue(i, false, false))
		case "queueerr":
			ok, err := h.queueErr(w)
			wantOK, wantErr := h.mQueueErr(i)
			h.check("QueueErr queued", ok, wantOK)
			if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
				h.t.Fatalf("QueueErr err = %v, model says %v (model %+v)", err, wantErr, h.m)
			}
		case "cancel":
			h.check("Cancel", w.Cancel(), h.mCancel(i))
		case "cancelsync", "disablesync":
			disable := op == "disablesync"
			if h.m.running == i {
				h.syncCancel(i, disable)
				break
			}
			if disable {
				h.check("DisableSync", w.DisableSync(), h.mDisable(i))
			} else {
				h.check("CancelSync", w.CancelSync(), h.mCancel(i))
			}
		case "disable":
			h.check("Disable", w.Disable(), h.mDisable(i))
		case "enable":
			if it.disabled == 0 {
				continue // reports an error by design; covered elsewhere
			}
			it.disabled--
			h.check("Enable", w.Enable(), it.disabled == 0)
		case "flush":
			if it.pending {
				continue // would wait for a later release
			}
			if h.m.running == i {
				h.asyncFlush(i)
				break
			}
			if i == 2 {
				h.check("DelayedWork.Flush", h.dw.Flush(), false)
			} else {
				h.check("Flush", w.Flush(), false)
			}
		case "check":
			h.checkItem(i)
		case "release":
			h.release(drawEnd(rt))
		case "delayed":
			if i != 2 {
				continue
			}
			h.check("QueueDelayed(1h)", h.queueDelayed(time.Hour), h.mQueue(2, true, false))
			h.checkTimerBackend("QueueDelayed(1h)")
		case "delayed-1ms":
			if i != 2 || h.m.running < 0 {
				continue // the firing is observable only while another item runs
			}
			want := h.mQueue(2, true, true)
			h.check("QueueDelayed(1ms)", h.queueDelayed(time.Millisecond), want)
			if want {
				h.waitFired()
			}
		case "mod", "mod-1ms":
			short := op == "mod-1ms"
			if i != 2 || short && h.m.running < 0 {
				continue
			}
			d := time.Hour
			if short {
				d = time.Millisecond
			}
			fires := short && it.held == 0 && it.disabled == 0
			h.check(fmt.Sprintf("ModDelayed(%v)", d), h.modDelayed(d), h.mMod(short))
			if !short {
				h.checkTimerBackend("ModDelayed(1h)")
			}
			if fires {
				h.waitFired()
			}
		case "self":
			if h.m.running < 0 {
				continue
			}
			selfOps := []string{"queue", "cancel", "cancelsync", "disable", "disablesync", "flush"}
			if h.m.items[h.m.running].disabled > 0 {
				selfOps = append(selfOps, "enable")
			}
			if h.m.running == 2 {
				selfOps = append(selfOps, "delayed", "mod", "mod-1ms", "mod-1ms")
			}
			h.selfOp(rapid.SampledFrom(selfOps).Draw(rt, "self-op"))
		}
		modelStat("op " + op)
		modelOps.Add(1)
		h.sync()
	}
	for i := range h.works {
		h.checkItem(i)
	}
	modelStat("variant " + v.name)

	if rapid.Bool().Draw(rt, "end-with-destroy") {
		h.destroyEnding(rt)
	} else {
		h.drainEnding(rt)
	}
	failed = false
}

// selfOp makes the running item call op on itself. While a sync canceller
// waits for the item, every grab is refused (Queue, QueueDelayed, Cancel,
// Disable: false; ModDelayed: true, nothing queued); a self CancelSync or
// DisableSync does not wait, reports ErrDeadlock and still cancels a
// pending instance; a self Flush reports ErrDeadlock.
func (h *harness) selfOp(op string) {
	r := h.m.running
	w := h.works[r]
	it := &h.m.items[r]
	what := fmt.Sprintf("self %s of item %d (held by %d)", op, r, it.held)
	if it.held > 0 {
		modelStat("self " + op + " while held")
	} else {
		modelStat("self " + op)
	}
	switch op {
	case "queue":
		h.check(what, h.self(what, func() bool { return h.queue(w) }), h.mQueue(r, false, false))
	case "cancel":
		h.check(what, h.self(what, w.Cancel), h.mCancel(r))
	case "disable":
		h.check(what, h.self(what, w.Disable), h.mDisable(r))
	case "cancelsync":
		h.m.deadlocks++
		h.check(what, h.self(what, w.CancelSync), h.mCancel(r))
	case "disablesync":
		h.m.deadlocks++
		h.check(what, h.self(what, w.DisableSync), h.mDisable(r))
	case "enable":
		it.disabled--
		h.check(what, h.self(what, w.Enable), it.disabled == 0)
	case "flush":
		h.m.deadlocks++
		if r == 2 {
			// An armed timer is fired at once (the item is queued), then the
			// wait would be on the caller itself.
			if it.armed {
				it.armed = false
				h.m.fifo = append(h.m.fifo, 2)
			}
			h.check(what, h.self(what, h.dw.Flush), false)
		} else {
			h.check(what, h.self(what, w.Flush), false)
		}
	case "delayed":
		h.check(what, h.self(what, func() bool { return h.queueDelayed(time.Hour) }), h.mQueue(2, true, false))
	case "mod", "mod-1ms":
		short := op == "mod-1ms"
		d := time.Hour
		if short {
			d = time.Millisecond
		}
		fires := short && it.held == 0 && it.disabled == 0
		h.check(what, h.self(what, func() bool { return h.modDelayed(d) }), h.mMod(short))
		if fires {
			h.waitFired() // the item runs, so its own re-arm cannot start yet
		}
	}
	// Reported synchronously, before the self-call returned.
	h.checkInt("ErrDeadlock reports after "+what, int(h.nDeadlock.Load()), h.m.deadlocks)
}

func (h *harness) stop() { h.stopped.Do(func() { close(h.abort) }) }

// drainEnding cancels the delayed item, lets everything run out and
// destroys the queue.
func (h *harness) drainEnding(rt *rapid.T) {
	h.check("final Cancel of the delayed item", h.dw.Cancel(), h.mCancel(2))
	for h.m.running >= 0 || len(h.m.fifo) > 0 {
		h.release(drawEnd(rt))
		modelOps.Add(1)
	}
	h.checkRescued()
	h.finish(h.q, 0)
}

// destroyEnding destroys the queue with the delayed item possibly armed:
// Destroy cancels it (idle, reported as ErrDelayedPending) and drains the
// rest, which the test lets run while Destroy waits. Afterwards the queue
// refuses work (ErrDestroyed, reported once) and the delayed item can be
// queued on a new queue.
func (h *harness) destroyEnding(rt *rapid.T) {
	h.checkRescued()
	// Sometimes arm the model's delayed item now, and up to three more
	// delayed items (never to run): Destroy cancels them all.
	if rapid.Bool().Draw(rt, "arm-before-destroy") {
		h.check("QueueDelayed(1h) before Destroy", h.queueDelayed(time.Hour), h.mQueue(2, true, false))
	}
	var extraRuns atomic.Int64
	extra := make([]*wq.DelayedWork, rapid.IntRange(0, 3).Draw(rt, "extra-armed"))
	for k := range extra {
		extra[k] = wq.NewDelayedWork(func() { extraRuns.Add(1) })
		h.check(fmt.Sprintf("QueueDelayed(1h) of extra delayed item %d", k), h.q.QueueDelayed(extra[k], time.Hour), true)
	}
	armed := len(extra) + b2i(h.m.items[2].armed)
	modelStat(fmt.Sprintf("destroy with %d delayed items armed", armed))
	q := h.q
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	for h.m.running >= 0 || len(h.m.fifo) > 0 {
		h.release(drawEnd(rt))
		modelOps.Add(1)
	}
	select {
	case <-destroyed:
	case <-time.After(modelDeadline):
		h.t.Fatalf("Destroy hangs (model %+v):\n%s", h.m, q.DumpState())
	}
	modelOps.Add(1)
	if it := &h.m.items[2]; it.armed {
		it.pending, it.armed = false, false
	}
	for i := range h.works {
		h.checkItem(i)
	}
	h.checkInt("ErrDelayedPending reports", int(h.nDelayedPending.Load()), b2i(armed > 0))
	if armed > 0 {
		h.mu.Lock()
		msg := h.delayedPendingMsg
		h.mu.Unlock()
		if want := fmt.Sprintf(": %d armed item(s) cancelled", armed); !strings.Contains(msg, want) {
			h.t.Fatalf("ErrDelayedPending report %q does not say %q", msg, want)
		}
	}
	for k, dw := range extra {
		h.check(fmt.Sprintf("extra delayed item %d Pending after Destroy", k), dw.Pending(), false)
		h.check(fmt.Sprintf("extra delayed item %d Flush after Destroy", k), dw.Flush(), false)
		h.check(fmt.Sprintf("extra delayed item %d Cancel after Destroy", k), dw.Cancel(), false)
	}
	h.check("DelayedWork.Flush after Destroy", h.dw.Flush(), false)
	h.check("Queue(item 0) after Destroy", h.queue(h.works[0]), false)
	h.check("Queue(item 1) after Destroy", h.queue(h.works[1]), false)
	h.checkInt("ErrDestroyed reports", int(h.nDestroyed.Load()), 1)

	// The delayed item is free for another queue.
	var err error
	if h.v.ordered {
		h.q, err = wq.AllocOrdered("model2", h.v.flags)
	} else {
		h.q, err = wq.Alloc("model2", h.v.flags, 1, h.v.allocOpts()...)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	want := h.mQueue(2, true, true)
	h.check("QueueDelayed(1ms) on a new queue after Destroy", h.queueDelayed(time.Millisecond), want)
	if want {
		h.sync()
		h.release(drawEnd(rt))
	}
	h.finish(h.q, 1)
	h.checkInt("runs of the extra delayed items cancelled by Destroy", int(extraRuns.Load()), 0)
}

// checkRescued: with every worker creation failing, the rescuer (the
// escaper, for an escape variant) ran every instance.
func (h *harness) checkRescued() {
	if h.v.create != createFailsAll {
		return
	}
	if h.preWorkers {
		return // a worker that existed before may have run some
	}
	n := 0
	for i := range h.starts {
		n += int(h.starts[i].Load())
	}
	if variantEscape[h.v.name] > 0 {
		h.checkInt("escaped instances (no worker can be created)", int(h.q.Stat("escaped")), n)
		return
	}
	h.checkInt("rescued instances (no worker can be created)", int(h.q.Stat("rescued")), n)
}

// finish destroys q (empty per the model) and checks the totals.
func (h *harness) finish(q *wq.Workqueue, destroyedReports int) {
	for i := range h.works {
		h.checkItem(i)
	}
	// A stray instance (one the model does not expect) is counted in
	// starts before it blocks; let it return so that Destroy ends.
	h.stop()
	destroyed := make(chan struct{})
	go func() { q.Destroy(); close(destroyed) }()
	select {
	case <-destroyed:
	case <-time.After(modelDeadline):
		h.t.Fatalf("Destroy of a queue the model says is idle hangs:\n%s", q.DumpState())
	}
	for i := range h.works {
		h.checkInt(fmt.Sprintf("item %d instances started in all", i), int(h.starts[i].Load()), h.m.items[i].runs)
		h.check(fmt.Sprintf("item %d Pending after Destroy", i), h.works[i].Pending(), false)
	}
	h.checkInt("ErrDeadlock reports", int(h.nDeadlock.Load()), h.m.deadlocks)
	h.checkInt("ErrDestroyed reports", int(h.nDestroyed.Load()), destroyedReports)
	for e := endPanic; e < nEnds; e++ {
		h.checkInt("panic handler calls ("+endNames[e]+")", int(h.nPanic[e].Load()), h.m.panics[e])
	}
	// Worker exits are reported from the exit path, asynchronously.
	h.waitUntil("the ErrWorkerExit reports", func() bool { return int(h.nExit.Load()) >= h.m.exits })
	h.checkInt("ErrWorkerExit reports", int(h.nExit.Load()), h.m.exits)
	h.mu.Lock()
	other := h.other
	h.mu.Unlock()
	if len(other) > 0 {
		h.t.Fatalf("unexpected reports: %q", other)
	}
}

// checkTimerBackend checks, after an arming of the delayed item for 1 h,
// that an armed item is timed by the RT timer thread exactly when the
// queue is RT.
func (h *harness) checkTimerBackend(what string) {
	if !h.dw.Armed() {
		return // refused, held by a canceller, or disabled: nothing armed
	}
	h.check(what+": armed on the RT timer thread", h.dw.ArmedOnRT(), h.v.flags&wq.RT != 0)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// quietLogs silences slog (panics recovered from the panic handler are
// logged with their stacks) for the test's duration.
func quietLogs(t *testing.T) {
	oldSlog, oldOut, oldFlags := slog.Default(), log.Writer(), log.Flags()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		slog.SetDefault(oldSlog)
		log.SetOutput(oldOut)
		log.SetFlags(oldFlags)
	})
}

func TestModelStateMachine(t *testing.T) {
	quietLogs(t)
	before := maps.Clone(modelStats)
	rapid.Check(t, func(rt *rapid.T) {
		runModel(rt, rapid.SampledFrom(plainVariants).Draw(rt, "variant"), 60)
	})
	logModelStats(t, before)
}

// TestModelRTTimers runs the model on RT queues, whose delayed item is
// timed by the RT timer thread: QueueDelayed, ModDelayed, Cancel,
// CancelSync, Flush, Disable and Destroy keep the model's return values and
// runs. Skipped where this process may not use SCHED_FIFO (as nobody).
func TestModelRTTimers(t *testing.T) {
	probe, err := wq.Alloc("model-rt-probe", wq.RT, 1)
	if err != nil {
		if errors.Is(err, wq.ErrPermission) {
			t.Skipf("RT queues not permitted here, so no RT timers: %v", err)
		}
		t.Fatal(err)
	}
	probe.Destroy()
	quietLogs(t)
	before := maps.Clone(modelStats)
	rapid.Check(t, func(rt *rapid.T) {
		runModel(rt, rapid.SampledFrom(rtTimerVariants).Draw(rt, "variant"), 60)
	})
	logModelStats(t, before)
}

// TestModelEscape runs the model on per-CPU queues with escape_after:
// the return values are the model's whether an item runs on its CPU's
// pool or on the escaper, and with no worker creatable the escaper runs
// every instance.
func TestModelEscape(t *testing.T) {
	if len(wq.OnlineCPUs()) < 2 {
		t.Skip("needs 2 CPUs: an item escapes to another CPU")
	}
	quietLogs(t)
	before := maps.Clone(modelStats)
	rapid.Check(t, func(rt *rapid.T) {
		runModel(rt, rapid.SampledFrom(escapeVariants).Draw(rt, "variant"), 25)
	})
	logModelStats(t, before)
}

// TestModelRescuer runs the model on MemReclaim queues whose worker
// creation fails always or by a pattern: the rescuer (restarted after a
// Goexit) and the retried creations must run every item, and the return
// values stay those of the model.
func TestModelRescuer(t *testing.T) {
	quietLogs(t)
	before := maps.Clone(modelStats)
	rapid.Check(t, func(rt *rapid.T) {
		runModel(rt, rapid.SampledFrom(rescuerVariants).Draw(rt, "variant"), 25)
	})
	logModelStats(t, before)
}

// modelRuns counts model runs (rapid test cases, shrinking included).
var modelRuns int64

// TestModelLong is the model test's long mode, off unless
// GOWQ_MODEL_LONG is set to a number of operations, e.g.
//
//	GOWQ_MODEL_LONG=1000000 go test -run Model -timeout 30m -v .
//
// It runs rounds of rapid checks (500 per round on the plain variants, 100
// on the rescuer variants, unless -rapid.checks is given) until the model
// runs have executed at least that many operations, about 4% of them on
// the rescuer variants (slower: every item start waits for a mayday), and
// logs the operations executed and the violations (failed rounds). A
// failed round does not stop the next ones; three do. 10^6 operations took
// 3 min 21 s on 2 CPUs (shared with other test runs), 0 violations; the
// time is mostly waiting (mayday and 1 ms timers), not CPU.
func TestModelLong(t *testing.T) {
	s := os.Getenv("GOWQ_MODEL_LONG")
	if s == "" {
		t.Skip("set GOWQ_MODEL_LONG=<operations> to run the long mode")
	}
	target, err := strconv.ParseInt(s, 10, 64)
	if err != nil || target <= 0 {
		t.Fatalf("GOWQ_MODEL_LONG=%q: want a positive number of operations", s)
	}
	quietLogs(t)
	before := maps.Clone(modelStats)
	checks := flag.Lookup("rapid.checks")
	userChecks := checks != nil && checks.Value.String() != checks.DefValue
	if checks != nil {
		old := checks.Value.String()
		t.Cleanup(func() { _ = checks.Value.Set(old) })
	}
	start := time.Now()
	ops0, runs0 := modelOps.Load(), modelRuns
	var rescuerOps int64
	violations, rounds := 0, 0
	for done := int64(0); done < target; done = modelOps.Load() - ops0 {
		rescuer := rescuerOps*25 < done
		variants, maxOps, n := plainVariants, 100, "500"
		if rescuer {
			variants, maxOps, n = rescuerVariants, 30, "100"
		}
		if checks != nil && !userChecks {
			_ = checks.Value.Set(n)
		}
		kind := "plain"
		if rescuer {
			kind = "rescuer"
		}
		n0 := modelOps.Load()
		ok := t.Run(fmt.Sprintf("round%03d-%s", rounds, kind), rapid.MakeCheck(func(rt *rapid.T) {
			runModel(rt, rapid.SampledFrom(variants).Draw(rt, "variant"), maxOps)
		}))
		if rescuer {
			rescuerOps += modelOps.Load() - n0
		}
		rounds++
		if !ok {
			violations++
			if violations >= 3 {
				t.Logf("stopping after %d violations", violations)
				break
			}
		}
	}
	t.Logf("long mode: %d operations (%d on rescuer variants) in %d model runs, %d rounds, %d violations, %v",
		modelOps.Load()-ops0, rescuerOps, modelRuns-runs0, rounds, violations, time.Since(start).Round(time.Second))
	logModelStats(t, before)
}
