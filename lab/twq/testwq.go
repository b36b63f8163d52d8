package twq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/probe"
)

// Defaults and bounds of TestWorkqueueOptions.
const (
	// DefaultItems is the kernel module's wq_items: items per thread.
	DefaultItems = 50000
	maxItems     = 10_000_000
)

// Waiters of the test_workqueue method.
const (
	// WaiterPinned: each thread is an OS thread pinned to its CPU (the
	// kernel's kthread_bind) and waits for its item's completion in
	// futex_wait (labsys.Parker), woken by the work function, as the
	// kernel's wait_for_completion.
	WaiterPinned = "pinned"
	// WaiterGoroutine: each "thread" is a plain goroutine, not locked or
	// pinned, that waits on a channel the work function sends on.
	WaiterGoroutine = "goroutine"
	// WaiterPinnedChan: an OS thread pinned to its CPU, as WaiterPinned,
	// that waits on a channel: the Go scheduler must hand it a P and wake
	// its thread (startlockedm), two thread wake-ups per item.
	WaiterPinnedChan = "pinned-chan"
)

// Scopes are the affinity scopes the method runs, in the module's order.
var Scopes = []wq.Scope{wq.ScopeCPU, wq.ScopeSMT, wq.ScopeCacheShard, wq.ScopeCache, wq.ScopeNUMA, wq.ScopeSystem}

// TestWorkqueueOptions shape RunTestWorkqueue.
type TestWorkqueueOptions struct {
	// Threads is the number of queuing threads, one per online CPU in
	// order; 0 or more than the online CPUs means one per online CPU (the
	// module's nr_threads).
	Threads int
	// Items per thread (0: DefaultItems; 1..1e7).
	Items int
	// Waiters selects the variants (WaiterPinned, WaiterGoroutine,
	// WaiterPinnedChan); empty runs WaiterPinned and WaiterGoroutine.
	Waiters []string
	// Scopes, when not empty, restricts the scopes run.
	Scopes []wq.Scope
	// NoProbe leaves out the raw futex ping-pong rows.
	NoProbe bool
	// Rounds repeats the whole sequence (every variant and scope, then
	// the probe) this many times, interleaved, and reports each row's
	// median items/s (0: 1, as the module; 1..100).
	Rounds int
}

// TWQRow is one line of the module's output: a variant and scope (or a
// probe row), its throughput and its queue-call percentiles in ns.
type TWQRow struct {
	Waiter  string  `json:"waiter"` // WaiterPinned, WaiterGoroutine or "probe"
	Label   string  `json:"label"`  // the scope name, or the probe row's name
	Threads int     `json:"threads"`
	Items   int     `json:"items_per_thread"`
	PerSec  float64 `json:"items_per_sec"` // median over the rounds
	// PerSecMin and PerSecMax are the extremes over the rounds.
	PerSecMin float64 `json:"items_per_sec_min"`
	PerSecMax float64 `json:"items_per_sec_max"`
	Rounds    int     `json:"rounds"`
	P50       int64   `json:"queue_call_p50_ns"`
	P90       int64   `json:"queue_call_p90_ns"`
	P95       int64   `json:"queue_call_p95_ns"`
	Skipped   string  `json:"skipped,omitempty"`
}

// TWQResult is a whole run.
type TWQResult struct {
	driver.Doc          // schema: driver.Schema(TestWorkqueueName), set by WriteJSON
	Online     []int    `json:"online"`
	Rows       []TWQRow `json:"rows"`
}

// TestWorkqueueName is the test_workqueue method's experiment name: the
// wqlab subcommand, and the schema of its JSON document is
// driver.Schema(TestWorkqueueName).
const TestWorkqueueName = "twq"

// TestWorkqueueExperiment returns `wqlab twq` with options o as a
// driver.Experiment named TestWorkqueueName. Its rows are the affinity
// scopes' names; its Validate is o.Validate, its Run is
// RunTestWorkqueue(ctx, o) and its Result a *TWQResult.
func TestWorkqueueExperiment(o TestWorkqueueOptions) driver.Experiment {
	var rows []string
	for _, s := range Scopes {
		rows = append(rows, s.String())
	}
	run := func(ctx context.Context) (*TWQResult, error) { return RunTestWorkqueue(ctx, o) }
	return driver.Func[*TWQResult]{ID: TestWorkqueueName, Rows: rows, Check: o.Validate, Measure: run}
}

// Validate checks o without running anything, after defaults: an error
// wrapping ErrInvalidOption that names the bad value, or nil.
func (o TestWorkqueueOptions) Validate() error {
	_, err := o.normalize()
	return err
}

func (o TestWorkqueueOptions) normalize() (TestWorkqueueOptions, error) {
	if o.Items == 0 {
		o.Items = DefaultItems
	}
	if o.Items < 1 || o.Items > maxItems {
		return o, fmt.Errorf("%w: items %d (want 1..%d)", ErrInvalidOption, o.Items, maxItems)
	}
	if o.Rounds == 0 {
		o.Rounds = 1
	}
	if o.Rounds < 1 || o.Rounds > 100 {
		return o, fmt.Errorf("%w: rounds %d (want 1..100)", ErrInvalidOption, o.Rounds)
	}
	if o.Threads < 0 {
		return o, fmt.Errorf("%w: threads %d (want >= 0)", ErrInvalidOption, o.Threads)
	}
	if len(o.Waiters) == 0 {
		o.Waiters = []string{WaiterPinned, WaiterGoroutine}
	}
	for _, w := range o.Waiters {
		if w != WaiterPinned && w != WaiterGoroutine && w != WaiterPinnedChan {
			return o, fmt.Errorf("%w: waiter %q (want %s, %s or %s)", ErrInvalidOption, w, WaiterPinned, WaiterGoroutine, WaiterPinnedChan)
		}
	}
	if len(o.Scopes) == 0 {
		o.Scopes = Scopes
	}
	for _, s := range o.Scopes {
		if !slices.Contains(Scopes, s) {
			return o, fmt.Errorf("%w: scope %v", ErrInvalidOption, s)
		}
	}
	return o, nil
}

// RunTestWorkqueue runs the kernel's lib/test_workqueue.c method on gowq:
// a shared unbound queue ("bench_wq"); for each scope, the threads start
// together, and each queues one item at a time, timing the Queue call,
// and waits for that item to run before it queues the next; the row gives
// items/s over the whole scope run (from the start to the last thread's
// end and a Flush) and the queue call's p50/p90/p95 over every item of
// every thread, as the module prints them. It runs each selected waiter
// variant, then (unless NoProbe) the raw futex ping-pong between two C
// threads, with the partner pinned to the driver's CPU and not pinned:
// the limit of the loop without any Go scheduler. It blocks for the whole
// run. Errors: an invalid option (ErrInvalidOption), a queue that cannot
// be allocated, a scope the process cannot apply, ctx.Err().
func RunTestWorkqueue(ctx context.Context, o TestWorkqueueOptions) (*TWQResult, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	online := wq.OnlineCPUs()
	n := o.Threads
	if n == 0 || n > len(online) {
		n = len(online)
	}
	cpus := online[:n]
	res := &TWQResult{Online: online}
	// Thread workers, as the kernel's kworkers: a goroutine-backed queue
	// (what default attributes give) has one pool whatever the scope, so
	// the scopes would not differ.
	q, err := wq.Alloc("bench_wq", wq.Unbound, 0, wq.Threads())
	if err != nil {
		return nil, err
	}
	defer q.Destroy()
	type acc struct {
		row   TWQRow
		rates []float64
		lat   []int64
	}
	var accs []*acc
	add := func(i int, row TWQRow, elapsed time.Duration, lat []int64) {
		if i == len(accs) {
			accs = append(accs, &acc{row: row})
		}
		a := accs[i]
		if row.Skipped != "" {
			a.row.Skipped = row.Skipped
			return
		}
		if us := elapsed.Microseconds(); us > 0 {
			a.rates = append(a.rates, float64(len(lat))*1e6/float64(us))
		}
		a.lat = append(a.lat, lat...)
	}
	for range o.Rounds {
		i := 0
		for _, waiter := range o.Waiters {
			for _, sc := range o.Scopes {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				row := TWQRow{Waiter: waiter, Label: sc.String(), Threads: n, Items: o.Items}
				if err := q.SetAffinityScope(sc); err != nil {
					row.Skipped = err.Error()
					add(i, row, 0, nil)
					i++
					continue
				}
				elapsed, lat, err := benchScope(q, cpus, o.Items, waiter)
				if err != nil {
					return nil, err
				}
				add(i, row, elapsed, lat)
				i++
			}
		}
		if o.NoProbe {
			continue
		}
		for _, pr := range []struct {
			label   string
			partner int
		}{
			{"raw-futex-pingpong-same-cpu", online[0]},
			{"raw-futex-pingpong-unpinned", -1},
		} {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row := TWQRow{Waiter: "probe", Label: pr.label, Threads: 1, Items: o.Items}
			elapsed, lat, err := probe.PingPong(o.Items, online[0], pr.partner)
			switch {
			case errors.Is(err, probe.ErrUnavailable):
				row.Skipped = err.Error() // a build without cgo has no probe
			case err != nil:
				return nil, err
			}
			add(i, row, elapsed, lat)
			i++
		}
	}
	for _, a := range accs {
		a.row.fill(a.rates, a.lat)
		res.Rows = append(res.Rows, a.row)
	}
	return res, nil
}

// fill sets the throughput from each round's rate (items * 1e6 / elapsed
// us, as the module computes it): the median, min and max; and the
// percentiles from every queue-call latency (sorted in place), the element
// at total * p / 100, as the module picks them.
func (r *TWQRow) fill(rates []float64, lat []int64) {
	slices.Sort(lat)
	slices.Sort(rates)
	r.Rounds = len(rates)
	if len(rates) > 0 {
		r.PerSec, r.PerSecMin, r.PerSecMax = rates[len(rates)/2], rates[0], rates[len(rates)-1]
	}
	if len(lat) > 0 {
		r.P50, r.P90, r.P95 = lat[len(lat)*50/100], lat[len(lat)*90/100], lat[len(lat)*95/100]
	}
}

// warmRounds is the number of untimed round trips each thread makes
// before a scope's clock starts.
const warmRounds = 200

// benchScope runs one scope: one waiter per CPU of cpus, items each. It
// returns the elapsed time and every queue call's duration in ns.
func benchScope(q *wq.Workqueue, cpus []int, items int, waiter string) (time.Duration, []int64, error) {
	lats := make([][]int64, len(cpus))
	errs := make([]error, len(cpus))
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(len(cpus))
	done.Add(len(cpus))
	for i, cpu := range cpus {
		lat := make([]int64, items)
		lats[i] = lat
		body := func(wait func(), w *wq.Work) {
			defer done.Done()
			// Untimed rounds first, so that the scope's pools have their
			// workers before the clock starts (the kernel's module finds
			// its kworkers running).
			for range warmRounds {
				q.Queue(w)
				wait()
			}
			ready.Done()
			<-start
			for k := range lat {
				t0 := labsys.MonotonicNow()
				queued := q.Queue(w)
				lat[k] = labsys.MonotonicNow() - t0
				if !queued {
					errs[i] = errors.New("twq: an idle item was not queued")
					return
				}
				wait()
			}
		}
		switch waiter {
		case WaiterPinned, WaiterPinnedChan:
			pk := &labsys.Parker{}
			ch := make(chan struct{}, 1)
			w := wq.NewWork(func() { pk.Unpark() })
			wait := pk.Park
			if waiter == WaiterPinnedChan {
				w = wq.NewWork(func() { ch <- struct{}{} })
				wait = func() { <-ch }
			}
			// A locked thread pinned to its CPU, as kthread_bind; the
			// goroutine exits locked, so the runtime discards the thread.
			if err := labsys.GoThread(func() {
				if err := labsys.SetThreadAffinity([]int{cpu}); err != nil {
					errs[i] = fmt.Errorf("twq: pin to cpu%d: %w", cpu, err)
					ready.Done()
					done.Done()
					return
				}
				body(wait, w)
			}); err != nil {
				errs[i] = fmt.Errorf("twq: thread for cpu%d: %w", cpu, err)
				ready.Done()
				done.Done()
			}
		default:
			ch := make(chan struct{}, 1)
			w := wq.NewWork(func() { ch <- struct{}{} })
			go body(func() { <-ch }, w)
		}
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	q.Flush()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, nil, err
	}
	var all []int64
	for _, l := range lats {
		all = append(all, l...)
	}
	return elapsed, all, nil
}

// WriteJSON writes the run as one indented JSON document with the
// schema driver.Schema(TestWorkqueueName) and TWQResult's JSON tags (ns,
// items/s). It returns w's error.
func (r *TWQResult) WriteJSON(w io.Writer) error {
	return driver.WriteResult(w, TestWorkqueueName, r)
}

// WriteTable is Write: the driver.Result form.
func (r *TWQResult) WriteTable(w io.Writer) error { return r.Write(w) }

// Write prints the run in the module's format ("test_workqueue: <label>
// <n> items/sec p50=<ns> p90=<ns> p95=<ns> ns"), a header per variant,
// and the goal check: the pinned variant on the default scope against the
// raw futex ping-pong, both per queuing thread.
func (r *TWQResult) Write(w io.Writer) error {
	var b strings.Builder
	last := ""
	var dflt, raw float64
	for _, row := range r.Rows {
		if row.Waiter != last {
			last = row.Waiter
			switch row.Waiter {
			case "probe":
				fmt.Fprintf(&b, "test_workqueue: raw probe: 2 C threads, futex ping-pong, %d round trips\n", row.Items)
			default:
				fmt.Fprintf(&b, "test_workqueue: running %d threads, %d items/thread (%s waiters)\n", row.Threads, row.Items, row.Waiter)
			}
		}
		if row.Skipped != "" {
			fmt.Fprintf(&b, "test_workqueue: %s skipped: %s\n", row.Label, row.Skipped)
			continue
		}
		fmt.Fprintf(&b, "test_workqueue: %s %.0f items/sec p50=%d p90=%d p95=%d ns", row.Label, row.PerSec, row.P50, row.P90, row.P95)
		if row.Rounds > 1 {
			fmt.Fprintf(&b, " (median of %d rounds, %.0f..%.0f)", row.Rounds, row.PerSecMin, row.PerSecMax)
		}
		b.WriteString("\n")
		switch {
		case row.Waiter == WaiterPinned && row.Label == wq.ScopeCacheShard.String():
			dflt = row.PerSec / float64(row.Threads)
		case row.Waiter == "probe":
			raw = max(raw, row.PerSec)
		}
	}
	b.WriteString("p50/p90/p95: percentiles of the Queue call's own time (from the call to its return, not until the item runs), in ns, over every item of every thread; items/sec: items queued and run per second over the whole run\n")
	if dflt > 0 && raw > 0 {
		met := "met"
		if dflt < raw/3 {
			met = "NOT met"
		}
		fmt.Fprintf(&b, "goal: pinned-thread ping-pong on the default scope (cache_shard) %.0f items/s per thread = %.2fx the raw futex ping-pong's best %.0f/s (goal >= 0.33x): %s\n",
			dflt, dflt/raw, raw, met)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
