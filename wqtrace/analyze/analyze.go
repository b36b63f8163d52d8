package analyze

import (
	"cmp"
	"slices"

	"github.com/gowq/wq/wqtrace"
)

// Item is one execution of a work item that was both queued and started
// within the events: the four tracepoints of one instance, paired.
// Timestamps are in ns (the events' TimeNs).
type Item struct {
	Work      uintptr `json:"work"`
	Workqueue string  `json:"workqueue"` // from the QueueWork event
	Function  string  `json:"function"`  // from QueueWork, else from ExecuteStart
	ReqCPU    int     `json:"req_cpu"`   // QueueWork's req_cpu
	TargetCPU int     `json:"target_cpu"`
	QueueCPU  int     `json:"queue_cpu"` // CPU the QueueWork event happened on
	ExecCPU   int     `json:"exec_cpu"`  // CPU of the ExecuteStart event
	WorkerTID int     `json:"worker_tid"`
	Worker    string  `json:"worker"` // Comm of the executing thread

	QueueNs     int64 `json:"queue_ns"`
	ActivateNs  int64 `json:"activate_ns"` // valid when HasActivate
	StartNs     int64 `json:"start_ns"`
	EndNs       int64 `json:"end_ns"` // valid when HasEnd
	HasActivate bool  `json:"has_activate"`
	HasEnd      bool  `json:"has_end"`
}

// QueueToStartNs returns the scheduling latency in ns: QueueWork to
// ExecuteStart.
func (it *Item) QueueToStartNs() int64 { return it.StartNs - it.QueueNs }

// Unmatched counts events whose partner is missing; they are left out of
// the latency statistics (see the package doc for the one ambiguous case).
type Unmatched struct {
	// Queue counts QueueWork events never followed by an ExecuteStart of
	// the same work: queued near the end of the capture, cancelled
	// (cancel_work has no tracepoint), or whose start was lost.
	Queue int `json:"queue"`
	// Superseded is the part of Queue replaced by a later QueueWork of the
	// same work before any start: the kernel never has one work pending
	// twice, so the earlier one was cancelled or its start was lost.
	Superseded int `json:"superseded"`
	// Activate counts ActivateWork events with no pending QueueWork (the
	// queue happened before the capture) or a second activate of one queue.
	Activate int `json:"activate"`
	// Start counts ExecuteStart events with no pending QueueWork (queued
	// before the capture began), or whose function differs from the pending
	// QueueWork's (an address reused by another work item).
	Start int `json:"start"`
	// End counts ExecuteEnd events with no open ExecuteStart of the same
	// work on the same thread.
	End int `json:"end"`
	// NoEnd counts ExecuteStart events with no ExecuteEnd: still running
	// when the capture ended, or the end was lost. Their queue-to-start
	// latency is counted; their execution time is not.
	NoEnd int `json:"no_end"`
}

// Total returns the number of unmatched events (Superseded is part of Queue
// and not added twice).
func (u Unmatched) Total() int { return u.Queue + u.Activate + u.Start + u.End + u.NoEnd }

type pending struct {
	ev       *wqtrace.Event // the QueueWork
	activate int64
	hasAct   bool
}

type runKey struct {
	work uintptr
	tid  int
}

// Pair pairs events per work item: QueueWork -> ActivateWork ->
// ExecuteStart -> ExecuteEnd. It returns the items that were queued and
// started, in order of ExecuteStart, and the counts of unmatched events.
//
// Events are taken in time order (a stable sort by TimeNs, so events with
// equal timestamps keep their input order); events is not modified. Events
// with an invalid Kind are ignored.
//
// The rules, which follow the kernel's guarantees:
//   - A work address has at most one pending (queued, not started)
//     instance. A QueueWork while one is pending replaces it; the old one is
//     counted as unmatched (Superseded).
//   - ExecuteStart takes the pending instance of its address; ActivateWork
//     stamps it. The workqueue, which only QueueWork carries, is carried
//     over from it, and so is the function when the later events lack one
//     (older kernels print none on activate and execute_end).
//   - An execution is open from ExecuteStart to the ExecuteEnd of the same
//     address on the same thread (TID). A work item may be queued again
//     while it runs: the new instance is pending while the old one is open.
func Pair(events []wqtrace.Event) ([]Item, Unmatched) {
	evs := sortedByTime(events)
	var (
		items   []Item
		un      Unmatched
		pend    = make(map[uintptr]*pending)
		running = make(map[runKey]int) // index into items, -1: no item
	)
	for _, ev := range evs {
		switch ev.Kind {
		case wqtrace.QueueWork:
			if _, ok := pend[ev.Work]; ok {
				un.Queue++
				un.Superseded++
			}
			pend[ev.Work] = &pending{ev: ev}
		case wqtrace.ActivateWork:
			p, ok := pend[ev.Work]
			if !ok || p.hasAct || !sameFunc(p.ev.Function, ev.Function) {
				un.Activate++
				continue
			}
			p.activate, p.hasAct = ev.TimeNs, true
		case wqtrace.ExecuteStart:
			k := runKey{ev.Work, ev.TID}
			if _, open := running[k]; open {
				un.NoEnd++ // the previous execution's end was lost
			}
			p, ok := pend[ev.Work]
			if ok {
				delete(pend, ev.Work)
			}
			if !ok || !sameFunc(p.ev.Function, ev.Function) {
				if ok {
					un.Queue++
				}
				un.Start++
				running[k] = -1
				continue
			}
			fn := p.ev.Function
			if fn == "" {
				fn = ev.Function
			}
			items = append(items, Item{
				Work: ev.Work, Workqueue: p.ev.Workqueue, Function: fn,
				ReqCPU: p.ev.ReqCPU, TargetCPU: p.ev.TargetCPU, QueueCPU: p.ev.CPU,
				ExecCPU: ev.CPU, WorkerTID: ev.TID, Worker: ev.Comm,
				QueueNs: p.ev.TimeNs, ActivateNs: p.activate, HasActivate: p.hasAct,
				StartNs: ev.TimeNs,
			})
			running[k] = len(items) - 1
		case wqtrace.ExecuteEnd:
			k := runKey{ev.Work, ev.TID}
			i, ok := running[k]
			if !ok || (i >= 0 && !sameFunc(items[i].Function, ev.Function)) {
				un.End++
				continue
			}
			delete(running, k)
			if i >= 0 {
				items[i].EndNs, items[i].HasEnd = ev.TimeNs, true
			}
		}
	}
	un.Queue += len(pend)
	un.NoEnd += len(running)
	return items, un
}

// sameFunc reports whether two function names can belong to one work item:
// equal, or one of them not printed.
func sameFunc(a, b string) bool { return a == "" || b == "" || a == b }

func sortedByTime(events []wqtrace.Event) []*wqtrace.Event {
	evs := make([]*wqtrace.Event, 0, len(events))
	for i := range events {
		if events[i].Kind.Valid() {
			evs = append(evs, &events[i])
		}
	}
	if !slices.IsSortedFunc(evs, byTime) {
		slices.SortStableFunc(evs, byTime)
	}
	return evs
}

func byTime(a, b *wqtrace.Event) int { return cmp.Compare(a.TimeNs, b.TimeNs) }

// Group holds the statistics of the items of one workqueue, or of one
// (workqueue, function) pair. All Stats are in microseconds.
type Group struct {
	Workqueue string `json:"workqueue"`
	Function  string `json:"function,omitempty"` // empty for a per-workqueue group
	// Count is the number of items queued and started within the events.
	Count int `json:"count"`
	// Queued is the number of QueueWork events, started or not.
	Queued int `json:"queued"`

	QueueToActivate Stats `json:"queue_to_activate"` // items with an ActivateWork
	ActivateToStart Stats `json:"activate_to_start"` // items with an ActivateWork
	QueueToStart    Stats `json:"queue_to_start"`    // the scheduling latency
	Exec            Stats `json:"exec"`              // ExecuteStart to ExecuteEnd, items with an end

	// Hist is the log2 histogram of QueueToStart in us; set on the
	// per-workqueue groups and on Report.Total, nil on per-function groups.
	Hist *Log2Hist `json:"queue_to_start_hist,omitempty"`
}

// Report is the result of Analyze.
type Report struct {
	Events  int    `json:"events"`   // valid events analysed
	ByKind  [5]int `json:"by_kind"`  // events per wqtrace.Kind (index 0 unused)
	FirstNs int64  `json:"first_ns"` // TimeNs of the earliest event
	LastNs  int64  `json:"last_ns"`  // TimeNs of the latest event

	// Total covers every item, with Workqueue "(all)".
	Total *Group `json:"total"`
	// Workqueues has one group per workqueue, by Count descending, then name.
	Workqueues []*Group `json:"workqueues"`
	// Functions has one group per (workqueue, function), by Count
	// descending, then workqueue and function.
	Functions []*Group `json:"functions"`

	Unmatched Unmatched `json:"unmatched"`

	// Items are the paired executions, in order of ExecuteStart. They are
	// left out of the JSON, which would otherwise grow with the capture.
	Items []Item `json:"-"`
}

// Analyze pairs the events (see Pair) and computes, for every workqueue and
// every (workqueue, function), the count, queue-to-activate,
// activate-to-start, queue-to-start and execution time statistics, plus a
// log2 histogram of queue-to-start per workqueue. It works the same on
// events parsed from a kernel capture and on events recorded from gowq.
// Events with an invalid Kind are ignored; it never fails.
func Analyze(events []wqtrace.Event) *Report {
	items, un := Pair(events)
	r := &Report{Unmatched: un, Items: items}
	first := true
	queued := map[string]int{}
	queuedFn := map[[2]string]int{}
	for i := range events {
		ev := &events[i]
		if !ev.Kind.Valid() {
			continue
		}
		r.Events++
		r.ByKind[ev.Kind]++
		if first || ev.TimeNs < r.FirstNs {
			r.FirstNs = ev.TimeNs
		}
		if first || ev.TimeNs > r.LastNs {
			r.LastNs = ev.TimeNs
		}
		first = false
		if ev.Kind == wqtrace.QueueWork {
			queued[ev.Workqueue]++
			queuedFn[[2]string{ev.Workqueue, ev.Function}]++
		}
	}

	type acc struct {
		g                   *Group
		q2a, a2s, q2s, exec Samples
	}
	total := &acc{g: &Group{Workqueue: "(all)", Hist: &Log2Hist{}}}
	byWQ := map[string]*acc{}
	byFn := map[[2]string]*acc{}
	get := func(m map[string]*acc, wq string) *acc {
		a := m[wq]
		if a == nil {
			a = &acc{g: &Group{Workqueue: wq, Queued: queued[wq], Hist: &Log2Hist{}}}
			m[wq] = a
		}
		return a
	}
	for i := range items {
		it := &items[i]
		fk := [2]string{it.Workqueue, it.Function}
		fa := byFn[fk]
		if fa == nil {
			fa = &acc{g: &Group{Workqueue: it.Workqueue, Function: it.Function, Queued: queuedFn[fk]}}
			byFn[fk] = fa
		}
		for _, a := range []*acc{total, get(byWQ, it.Workqueue), fa} {
			a.g.Count++
			q2s := it.StartNs - it.QueueNs
			a.q2s.Add(q2s)
			if a.g.Hist != nil {
				a.g.Hist.AddNs(q2s)
			}
			if it.HasActivate {
				a.q2a.Add(it.ActivateNs - it.QueueNs)
				a.a2s.Add(it.StartNs - it.ActivateNs)
			}
			if it.HasEnd {
				a.exec.Add(it.EndNs - it.StartNs)
			}
		}
	}
	// Workqueues whose items were queued but never started still get a row.
	for wq := range queued {
		get(byWQ, wq)
	}
	for fk, n := range queuedFn {
		if byFn[fk] == nil {
			byFn[fk] = &acc{g: &Group{Workqueue: fk[0], Function: fk[1], Queued: n}}
		}
	}
	finish := func(a *acc) *Group {
		a.g.QueueToActivate = a.q2a.Stats()
		a.g.ActivateToStart = a.a2s.Stats()
		a.g.QueueToStart = a.q2s.Stats()
		a.g.Exec = a.exec.Stats()
		return a.g
	}
	total.g.Queued = r.ByKind[wqtrace.QueueWork]
	r.Total = finish(total)
	for _, a := range byWQ {
		r.Workqueues = append(r.Workqueues, finish(a))
	}
	for _, a := range byFn {
		r.Functions = append(r.Functions, finish(a))
	}
	order := func(a, b *Group) int {
		return cmp.Or(
			cmp.Compare(b.Count, a.Count),
			cmp.Compare(b.Queued, a.Queued),
			cmp.Compare(a.Workqueue, b.Workqueue),
			cmp.Compare(a.Function, b.Function))
	}
	slices.SortFunc(r.Workqueues, order)
	slices.SortFunc(r.Functions, order)
	return r
}

// Workqueue returns the per-workqueue group named name, or nil.
func (r *Report) Workqueue(name string) *Group {
	for _, g := range r.Workqueues {
		if g.Workqueue == name {
			return g
		}
	}
	return nil
}

// Function returns the group of (workqueue, function), or nil.
func (r *Report) Function(workqueue, function string) *Group {
	for _, g := range r.Functions {
		if g.Workqueue == workqueue && g.Function == function {
			return g
		}
	}
	return nil
}
