// Package wake measures queue-to-start latency of every gowq worker class
// and of the usual Go executors against the raw wake-up probe (two C
// threads handing a token through a futex, lab/probe), under
// CPU load, with a choice of queuing thread (SCHED_OTHER or SCHED_FIFO)
// and of in-process load (spinning goroutines, garbage for the GC).
//
// It runs on the lab driver (package lab/driver), as the wqlab scenarios
// do: the same loads (driver.Loads), the same interleaving
// (driver.Interleave: rounds of short slices, the order rotating by one
// row per round, so that drift in the machine's load affects every row
// alike) and the same box tables (driver.WriteBox). Latency is from just
// before the queue call (or futex_wake for the probe) to the first
// instruction of the work function (or the waiter's return from
// futex_wait), CLOCK_MONOTONIC, in us.
package wake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/baseline"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/probe"
	"github.com/gowq/wq/lab/stats"
)

// Name is the experiment's name: the wqlab subcommand, and the
// schema of its JSON document is driver.Schema(Name).
const Name = "wake"

// Load names an antagonist.
type Load string

// The loads (driver.LoadNone, driver.LoadBurners, driver.LoadHogs).
const (
	LoadNone    Load = "none"    // idle machine
	LoadBurners Load = "burners" // 8 cpuio qsort burners at 90% (seed 000)
	LoadHogs    Load = "hogs"    // one nice -20 hog pinned to each CPU
)

// Queuer is the scheduling class of the thread that queues the items (and
// of the raw probe's waker).
type Queuer string

// The queuers.
const (
	// QueuerOther is a SCHED_OTHER thread at nice 0 that spins
	// (runtime.Gosched) until the item has started: the default.
	QueuerOther Queuer = "other"
	// QueuerFIFO is a SCHED_FIFO thread at gowq's RT priority
	// (wq.RTPriority) that blocks in futex_wait until the item has
	// started, as a 1 kHz GPU submitter or an RT control loop would.
	// The raw probe's waker runs at SCHED_FIFO too; the
	// SCHED_OTHER probe row is then skipped (its waiter would inherit the
	// waker's policy).
	QueuerFIFO Queuer = "fifo"
)

// Defaults of Options.
const (
	DefaultSamples = 2000
	DefaultGap     = 200 * time.Microsecond
	DefaultSlice   = 100
	// MaxSamples bounds Options.Samples.
	MaxSamples = 1_000_000
	// MaxGoLoad bounds Options.GoLoad.
	MaxGoLoad = 1024
	// MaxGCLoad bounds Options.GCLoad (MiB/s).
	MaxGCLoad = 4096
)

// Options shape a run. The zero value is a run under no load with the
// defaults.
type Options struct {
	Load    Load
	Samples int           // samples per configuration (0: DefaultSamples; 1..MaxSamples)
	Gap     time.Duration // pause between two samples of one configuration (0: DefaultGap)
	Slice   int           // samples per configuration per round (0: DefaultSlice)
	Queuer  Queuer        // "" or QueuerOther, QueuerFIFO
	// GoLoad starts this many goroutines of the process itself that spin
	// for the whole run, so that every P is busy (in-process load, issue
	// 14); 0 starts none. 0..MaxGoLoad.
	GoLoad int
	// WQLoad keeps this many CPU-bound items of driver.WQLoadItem in
	// flight on a default (goroutine-backed) queue of the process for the
	// whole run (driver.WQLoad): in-process load made of gowq's own
	// goroutines; 0 runs none. 0..driver.MaxWQLoad.
	WQLoad int
	// Configs, when not empty, selects rows by name (Configs()); the
	// others are left out of the table.
	Configs  []string
	Progress func(done, total int)

	// Explain gathers evidence around every sample and attributes each
	// outlier to a likely cause (Result.Explain). Off, the
	// run collects nothing beyond the latencies.
	Explain bool
	// ExplainThreshold, when > 0, is the outlier threshold; 0 takes
	// max(DefaultExplainThreshold, 10x the raw probe's max).
	ExplainThreshold time.Duration
	// GOGC, when not nil, sets the GC percent for the run
	// (debug.SetGCPercent; < 0 turns the GC off) and restores it after.
	GOGC *int
	// Mlock locks the process's memory first (labsys.Mlockall); it stays
	// locked after the run.
	Mlock bool
	// GCLoad runs an in-process allocation load of this many MiB/s of
	// garbage (driver.GCLoad), so that GC cycles happen during the run;
	// 0 runs none. 0..MaxGCLoad.
	GCLoad int
}

// Row is one configuration's result.
type Row struct {
	Config  string        `json:"config"`
	Kind    string        `json:"kind"`              // "probe", "gowq" or "go"
	Skipped string        `json:"skipped,omitempty"` // reason, when not measured
	Summary stats.Summary `json:"summary"`           // us
}

// Result is a whole run.
type Result struct {
	driver.Doc           // schema: driver.Schema(Name), set by WriteJSON
	Load       Load      `json:"load"`
	LoadName   string    `json:"load_name,omitempty"` // what ran, e.g. "8 burners at 90% (qsort)"
	LoadNote   string    `json:"load_note,omitempty"` // a fallback the load took
	LoadPct    []float64 `json:"load_pct_per_cpu"`
	Queuer     Queuer    `json:"queuer"`
	QueuerOn   string    `json:"queuer_on"` // how the queueing thread ran, e.g. "SCHED_OTHER nice 0, pinned to cpu1"
	GoLoad     int       `json:"go_load"`
	WQLoad     int       `json:"wq_load,omitempty"`
	WQItems    int64     `json:"wq_load_items,omitempty"` // items the WQLoad queue ran during the run
	GCLoad     int       `json:"gc_load_mib_s,omitempty"`
	GOGC       string    `json:"gogc,omitempty"` // set by Options.GOGC: a percent or "off"
	Mlock      bool      `json:"mlock,omitempty"`
	Samples    int       `json:"samples"` // samples asked per row
	Rows       []Row     `json:"rows"`
	Explain    *Explain  `json:"explain,omitempty"`
}

// Row kinds.
const (
	KindProbe = "probe"
	KindGowq  = "gowq"
	KindGo    = "go"
)

type config struct {
	name  string
	kind  string
	flags wq.Flags     // gowq
	probe probe.Policy // probe
	exec  string       // go: baseline.New name
}

var configs = []config{
	{name: "raw probe SCHED_FIFO", kind: KindProbe, probe: probe.FIFO},
	{name: "raw probe SCHED_OTHER", kind: KindProbe, probe: probe.Other},
	{name: "gowq RT per-CPU", kind: KindGowq, flags: wq.PerCPU | wq.RT},
	{name: "gowq RT unbound strict", kind: KindGowq, flags: wq.Unbound | wq.RT},
	{name: "gowq highpri per-CPU", kind: KindGowq, flags: wq.PerCPU | wq.HighPri},
	{name: "gowq normal per-CPU", kind: KindGowq, flags: wq.PerCPU},
	{name: "gowq normal unbound", kind: KindGowq, flags: wq.Unbound},
	{name: "go statement", kind: KindGo, exec: "go"},
	{name: "channel pool", kind: KindGo, exec: "chan"},
	{name: "ants/v2", kind: KindGo, exec: "ants"},
	{name: "pond/v2", kind: KindGo, exec: "pond"},
}

// Configs returns the row names, in table order.
func Configs() []string {
	out := make([]string, len(configs))
	for i, c := range configs {
		out[i] = c.name
	}
	return out
}

// ErrInvalidOption is returned by Run and Options.Validate for a bad
// option; test with errors.Is. It wraps driver.ErrInvalidOption.
var ErrInvalidOption = driver.InvalidOption("wake")

// Validate checks o without running anything, after defaults. It returns
// an error wrapping ErrInvalidOption that names the bad value, or nil.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

func (o Options) normalize() (Options, error) {
	c, err := driver.Counted{Samples: o.Samples, Gap: o.Gap, Slice: o.Slice}.Normalize(
		driver.Counted{Samples: DefaultSamples, Gap: DefaultGap, Slice: DefaultSlice}, MaxSamples, ErrInvalidOption)
	o.Samples, o.Gap, o.Slice = c.Samples, c.Gap, c.Slice
	if err != nil {
		return o, err
	}
	if o.Load == "" {
		o.Load = LoadNone
	}
	if o.Queuer == "" {
		o.Queuer = QueuerOther
	}
	switch {
	case o.GoLoad < 0 || o.GoLoad > MaxGoLoad:
		return o, fmt.Errorf("%w: go-load %d (want 0..%d)", ErrInvalidOption, o.GoLoad, MaxGoLoad)
	case o.WQLoad < 0 || o.WQLoad > driver.MaxWQLoad:
		return o, fmt.Errorf("%w: wq-load %d (want 0..%d)", ErrInvalidOption, o.WQLoad, driver.MaxWQLoad)
	case o.GCLoad < 0 || o.GCLoad > MaxGCLoad:
		return o, fmt.Errorf("%w: gc-load %d MiB/s (want 0..%d)", ErrInvalidOption, o.GCLoad, MaxGCLoad)
	case o.ExplainThreshold < 0:
		return o, fmt.Errorf("%w: negative explain threshold %v", ErrInvalidOption, o.ExplainThreshold)
	}
	switch o.Load {
	case LoadNone, LoadBurners, LoadHogs:
	default:
		return o, fmt.Errorf("%w: unknown load %q (want none, burners or hogs)", ErrInvalidOption, o.Load)
	}
	switch o.Queuer {
	case QueuerOther, QueuerFIFO:
	default:
		return o, fmt.Errorf("%w: unknown queuer %q (want other or fifo)", ErrInvalidOption, o.Queuer)
	}
	return o, driver.CheckConfigs(o.Configs, Configs(), ErrInvalidOption)
}

func (o Options) wants(name string) bool { return driver.Wants(o.Configs, name) }

// row is one configuration while it runs.
type row struct {
	c       config
	res     *Row
	samples *stats.Samples
	q       *wq.Workqueue
	e       baseline.Executor
	overNs  []int64    // explain: probe samples at or above the explainer's floor, ns
	prevEnd threadStat // explain: the worker's figures at the end of the last item
	warm    bool       // explain: the unrecorded first item ran
	work    *wq.Work   // gowq: the item of the current slice
	slot    stageSlot  // explain, gowq: the library's stages of the current sample
}

// Experiment returns `wqlab wake` with options o as a driver.Experiment
// named Name: its Validate is o.Validate, its Run is Run(ctx, o) and
// its Result a *Result.
func Experiment(o Options) driver.Experiment {
	run := func(ctx context.Context) (*Result, error) { return Run(ctx, o) }
	return driver.Func[*Result]{ID: Name, Rows: Configs(), Check: o.Validate, Measure: run}
}

// Run measures every selected configuration. It blocks for about
// rows * Samples * (Gap + latency), plus 200 ms for a load to settle.
// Errors: an invalid option (ErrInvalidOption), a queuer that cannot be
// set up (SCHED_FIFO not permitted for QueuerFIFO), or a workqueue that
// cannot be allocated for another reason than privilege; a row that needs
// a privilege this process lacks is skipped with the reason, and a load
// that cannot start is noted in Result.LoadNote. With Options.Mlock, an
// mlockall that fails is an error (wrapping wq.ErrPermission without the
// privilege). When ctx ends Run returns ctx.Err().
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	res := &Result{Load: o.Load, Queuer: o.Queuer, GoLoad: o.GoLoad, WQLoad: o.WQLoad, GCLoad: o.GCLoad, Samples: o.Samples, Mlock: o.Mlock}
	if o.Mlock {
		if err := labsys.Mlockall(); err != nil {
			return nil, fmt.Errorf("wake: --mlock: %w", err)
		}
	}
	if o.GOGC != nil {
		prev := debug.SetGCPercent(*o.GOGC)
		defer debug.SetGCPercent(prev)
		res.GOGC = fmt.Sprint(*o.GOGC)
		if *o.GOGC < 0 {
			res.GOGC = "off"
		}
	}
	online := wq.OnlineCPUs()
	// Every configuration is queued from one thread pinned to this CPU,
	// and the probe's two threads share it too: the wake-up is a same-CPU
	// preemption in every row where the worker may run there (a
	// cross-CPU wake of an idle virtual CPU costs an IPI, 20-40 us on
	// this kind of machine).
	cpu := online[len(online)-1]
	qr, err := startQueuer(cpu, o.Queuer)
	if err != nil {
		return nil, err
	}
	defer qr.stop()
	res.QueuerOn = qr.desc

	loads := &driver.Loads{}
	defer loads.Close()
	loads.Ensure(driver.LoadKind(o.Load), 200*time.Millisecond)
	res.LoadName, res.LoadNote = loads.Name(), loads.Note()
	stopGo := driver.GoLoad(o.GoLoad)
	defer stopGo()
	stopWQ, wqDone, err := driver.WQLoad(o.WQLoad)
	if err != nil {
		return nil, fmt.Errorf("wake: wq-load: %w", err)
	}
	defer func() { res.WQItems = wqDone(); stopWQ() }()
	stopGC := driver.GCLoad(o.GCLoad)
	defer stopGC()
	if o.Explain {
		qr.ex = newExplainer(o.ExplainThreshold)
		qr.ex.startTrace()
		labsys.SetStageRecorder(qr.ex.recordStages)
		defer func() { labsys.SetStageRecorder(nil); qr.ex.stopTrace(); qr.ex = nil }()
	}

	var rows []*row
	for _, c := range configs {
		if !o.wants(c.name) {
			continue
		}
		r := &row{c: c, res: &Row{Config: c.name, Kind: c.kind}, samples: stats.NewSamples(0)}
		rows = append(rows, r)
		switch c.kind {
		case KindProbe:
			switch err := probe.Available(); {
			case err != nil:
				r.res.Skipped = err.Error()
			case c.probe == probe.FIFO:
				if err := labsys.CheckRT(1); err != nil {
					r.res.Skipped = err.Error()
				}
			case o.Queuer == QueuerFIFO:
				r.res.Skipped = "with --queuer fifo the probe's waiter would inherit the waker's SCHED_FIFO"
			}
		case KindGowq:
			q, err := wq.Alloc("wake", c.flags, 0)
			if err != nil {
				if errors.Is(err, wq.ErrPermission) {
					r.res.Skipped = err.Error()
					continue
				}
				return nil, err
			}
			r.q = q
			defer q.Destroy()
		case KindGo:
			e, err := baseline.New(c.exec, max(2, runtime.NumCPU()))
			if err != nil {
				return nil, err
			}
			r.e = e
			defer e.Close()
		}
	}

	probe0 := loads.Probe()
	total := len(rows) * o.Samples
	done := 0
	driver.Interleave(ctx, len(rows), 0, func(i, _ int) bool {
		r := rows[i]
		n := min(o.Slice, o.Samples-int(r.samples.Len()))
		if n <= 0 || r.res.Skipped != "" {
			return false
		}
		if err := qr.measure(r, n, o.Gap); err != nil {
			r.res.Skipped = err.Error()
			return false
		}
		if qr.ex != nil {
			qr.ex.readPauses(false)
		}
		done += n
		if o.Progress != nil {
			o.Progress(done, total)
		}
		return true
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, r := range rows {
		if r.res.Skipped == "" {
			r.res.Summary = r.samples.Summary()
		}
		res.Rows = append(res.Rows, *r.res)
	}
	if qr.ex != nil {
		res.Explain = qr.explain(res, rows)
	}
	f := loads.Read(probe0)
	for _, c := range f.PerCPU {
		res.LoadPct = append(res.LoadPct, c.BusyPct)
	}
	res.LoadNote = driver.JoinNote(res.LoadNote, f.Note)
	return res, nil
}

// queuer is the thread that queues every item: locked, pinned, and
// SCHED_FIFO for QueuerFIFO. It runs requests one at a time.
type queuer struct {
	*driver.Thread
	cpu  int
	fifo bool
	prio int
	desc string
	ex   *explainer // explain mode, else nil
}

func startQueuer(cpu int, kind Queuer) (*queuer, error) {
	q := &queuer{cpu: cpu, fifo: kind == QueuerFIFO, prio: wq.RTPriority()}
	t, err := driver.StartThread(func() error {
		desc := fmt.Sprintf("pinned to cpu%d", cpu)
		if err := labsys.SetThreadAffinity([]int{cpu}); err != nil {
			desc = fmt.Sprintf("not pinned (%v)", err)
		}
		if q.fifo {
			if err := labsys.SetThreadAttr(labsys.ThreadAttr{Policy: labsys.ThreadFIFO, Priority: q.prio}); err != nil {
				return fmt.Errorf("wake: --queuer fifo: %w", err)
			}
			q.desc = fmt.Sprintf("SCHED_FIFO %d, %s", q.prio, desc)
		} else {
			q.desc = "SCHED_OTHER, " + desc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	q.Thread = t
	return q, nil
}

func (q *queuer) stop() { q.Stop() }

// measure records n samples of r on the queuer thread.
func (q *queuer) measure(r *row, n int, gap time.Duration) error {
	var err error
	body := func() {
		switch r.c.kind {
		case KindProbe:
			err = q.runProbe(r, n, gap)
		case KindGowq:
			q.loop(r, n, gap, func(fn func()) (func(), func() bool) {
				w := wq.NewWork(fn)
				r.work = w
				return func() { r.q.Queue(w) }, func() bool { return w.Busy() == 0 }
			})
		case KindGo:
			q.loop(r, n, gap, func(fn func()) (func(), func() bool) {
				return func() {
					if e := r.e.Submit(fn); e != nil && err == nil {
						err = e
					}
				}, nil
			})
		}
	}
	if (r.c.kind == KindGo || (r.c.kind == KindGowq && r.q.GoroutineBacked())) && !q.fifo {
		// A Go executor, and a gowq queue whose workers are goroutines
		// (wq.Workqueue.GoroutineBacked), is used from ordinary
		// goroutines: queue from one, unlocked and unpinned. (A locked
		// thread that yields hands its P to another thread and back, tens
		// of us per Gosched, which would be charged to the executor.)
		done := make(chan struct{})
		go func() {
			defer close(done)
			body()
		}()
		<-done
	} else {
		q.Do(body)
	}
	return err
}

// runProbe runs the raw probe from the queuer thread. With a FIFO queuer
// the thread drops SCHED_RESET_ON_FORK for the call, so that the probe's
// two C threads inherit SCHED_FIFO (the waiter then sets its own policy
// and priority, as it always does for the FIFO row).
func (q *queuer) runProbe(r *row, n int, gap time.Duration) error {
	if q.fifo {
		if err := labsys.SetThreadAttrInherited(labsys.ThreadAttr{Policy: labsys.ThreadFIFO, Priority: q.prio}); err != nil {
			return fmt.Errorf("FIFO for the probe's waker: %w", err)
		}
		defer labsys.SetThreadAttr(labsys.ThreadAttr{Policy: labsys.ThreadFIFO, Priority: q.prio})
	}
	lat, err := probe.Run(probe.Options{N: n, Policy: r.c.probe, Priority: 1, WaiterCPU: q.cpu, WakerCPU: q.cpu, Gap: gap})
	if err != nil {
		return err
	}
	for _, v := range lat {
		r.samples.Add(v)
		if q.ex != nil && v >= q.ex.floor {
			r.overNs = append(r.overNs, v)
		}
	}
	return nil
}

// explain attributes the run's outliers (explain mode).
func (q *queuer) explain(res *Result, rows []*row) *Explain {
	probeMax, probeName := 0.0, ""
	if p := res.get("raw probe SCHED_FIFO"); p != nil {
		probeMax, probeName = p.Summary.Max, "SCHED_FIFO"
	} else if p := res.get("raw probe SCHED_OTHER"); p != nil {
		probeMax, probeName = p.Summary.Max, "SCHED_OTHER"
	}
	over := map[string][]int64{}
	for _, r := range rows {
		if r.c.kind == KindProbe {
			over[r.c.name] = r.overNs
		}
	}
	return q.ex.finish(res, probeMax, probeName, over)
}

// loop queues an item n times, gap apart, and records queue-to-start in
// r.samples. setup is given the item's function once and returns queue,
// which hands the item to the configuration, and idle, which (when not
// nil) reports that the configuration is done with the previous item
// (gowq: the work is no longer busy); else the item's last instruction
// counts as done.
//
// A SCHED_OTHER queuer spins (runtime.Gosched) until the item started, as
// the seeds' measurements do. A FIFO queuer must block instead: spinning
// at SCHED_FIFO on the worker's CPU would starve a worker of a lower
// class, so it parks on a futex that the item unparks, and sleeps while
// waiting for idle.
func (q *queuer) loop(r *row, n int, gap time.Duration, setup func(fn func()) (queue func(), idle func() bool)) {
	if q.ex != nil {
		q.loopExplain(r, n, gap, setup)
		return
	}
	var start, fin atomic.Int64
	var pk labsys.Parker
	fn := func() {
		start.Store(stats.Now())
		if q.fifo {
			pk.Unpark()
		}
		fin.Store(1)
	}
	queue, idle := setup(fn)
	for i := 0; i < n; i++ {
		if gap > 0 {
			// nanosleep(2), as the probe's waker: a Go timer under 1 ms
			// often fires a whole ms late on an idle process.
			labsys.SleepThread(gap)
		}
		start.Store(0)
		fin.Store(0)
		t0 := stats.Now()
		queue()
		for start.Load() == 0 {
			q.wait(&pk)
		}
		r.samples.Add(start.Load() - t0)
		q.waitDone(&fin, idle)
	}
}

func (q *queuer) wait(pk *labsys.Parker) {
	if q.fifo {
		pk.Park()
	} else {
		runtime.Gosched()
	}
}

func (q *queuer) waitDone(fin *atomic.Int64, idle func() bool) {
	for fin.Load() == 0 || (idle != nil && !idle()) {
		if q.fifo {
			labsys.SleepThread(10 * time.Microsecond)
		} else {
			runtime.Gosched()
		}
	}
}

// loopExplain is loop in explain mode: the item's function reads its
// thread's figures after its start stamp and at its end; the queuer reads
// the pools' lock waits before each queue call (a gowq row) and its own
// figures around the call (see explain.go).
func (q *queuer) loopExplain(r *row, n int, gap time.Duration, setup func(fn func()) (queue func(), idle func() bool)) {
	x := q.ex
	var start, fin atomic.Int64
	var pk labsys.Parker
	var st, end threadStat // written by fn before fin, read after
	fn := func() {
		start.Store(stats.Now())
		st = x.stat.read()
		if q.fifo {
			pk.Unpark()
		}
		end = x.stat.read()
		fin.Store(1)
	}
	queue, idle := setup(fn)
	pools := r.c.kind == KindGowq
	lw, span, pend := int64(-1), int64(0), false
	if !r.warm {
		// One item not recorded, so that the first sample has the
		// worker's figures at the end of a previous item.
		r.warm = true
		queue()
		for start.Load() == 0 {
			q.wait(&pk)
		}
		q.waitDone(&fin, idle)
		r.prevEnd = end
	}
	for i := 0; i < n; i++ {
		if gap > 0 {
			labsys.SleepThread(gap)
		}
		if pools && (i == 0 || pend) {
			lw, span = lockWaits(), 0
			x.lockReading(r, lw)
		}
		span++
		start.Store(0)
		fin.Store(0)
		if r.work != nil {
			r.slot = stageSlot{w: r.work}
			x.slot.Store(&r.slot)
		}
		q0 := x.stat.read()
		t0 := stats.Now()
		queue()
		t1 := stats.Now()
		q1 := x.stat.read()
		for start.Load() == 0 {
			q.wait(&pk)
		}
		s := start.Load()
		r.samples.Add(s - t0)
		q.waitDone(&fin, idle)
		x.slot.Store(nil)
		pend = x.sample(r, t0, t1, s, q0, q1, r.prevEnd, st, lw, span)
		if pend && r.slot.ok {
			x.attachStages(r, &r.slot.s, t0, s)
		}
		r.prevEnd = end
	}
	if pools && pend {
		if gap > 0 {
			labsys.SleepThread(gap)
		}
		x.lockReading(r, lockWaits())
	}
}

// probeFor returns the raw probe row a row's p50 is compared with: the
// FIFO probe for RT rows and with a FIFO queuer, else the SCHED_OTHER
// probe.
func (r *Result) probeFor(row *Row) *Row {
	name := "raw probe SCHED_OTHER"
	if strings.Contains(row.Config, "RT") || r.Queuer == QueuerFIFO {
		name = "raw probe SCHED_FIFO"
	}
	return r.get(name)
}

// get returns the measured row named name (driver.Measured), nil if none.
func (r *Result) get(name string) *Row { return driver.Measured(r.Rows, name, rowKey) }

func rowKey(r *Row) (string, string, int64) { return r.Config, r.Skipped, r.Summary.Count }

// WriteJSON writes r as one indented JSON document whose "schema" is
// driver.Schema(Name) (wake's fields: Result's JSON tags, latencies
// in us). It returns w's error.
func (r *Result) WriteJSON(w io.Writer) error {
	return driver.WriteResult(w, Name, r)
}

// WriteTable prints the result as a box table (driver.WriteBox): per row
// the sample count, min, p50, avg, p99 and max in us, and p50 as a
// multiple of the raw probe's p50 of the same policy; then the
// targets: RT p99 within 2x of the raw SCHED_FIFO probe's p99, the normal
// class's p99 at least 10x RT's, and the worst case: the best RT row's max
// within 10x of the probe's max with a SCHED_OTHER queuer, 3x with a FIFO
// one. It returns w's error.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "queue-to-start latency, load: %s", r.Load)
	driver.WriteLoad(&b, string(r.Load), r.LoadName, r.LoadPct)
	b.WriteByte('\n')
	fmt.Fprintf(&b, "queuer: %s; in-process load: %d spinning goroutines (GOMAXPROCS %d)\n", r.QueuerOn, r.GoLoad, runtime.GOMAXPROCS(0))
	if r.WQLoad > 0 {
		fmt.Fprintf(&b, "gowq load: %d CPU-bound items of %v in flight on a default queue (%d items ran)\n", r.WQLoad, driver.WQLoadItem, r.WQItems)
	}
	if r.GCLoad > 0 || r.GOGC != "" || r.Mlock {
		gogc := r.GOGC
		if gogc == "" {
			gogc = "unchanged"
		}
		fmt.Fprintf(&b, "GC: allocation load %d MiB/s, GOGC %s, mlockall %v\n", r.GCLoad, gogc, r.Mlock)
	}
	if r.LoadNote != "" {
		fmt.Fprintf(&b, "note: %s\n", r.LoadNote)
	}
	var lines []driver.Line
	for i := range r.Rows {
		row := &r.Rows[i]
		if row.Skipped != "" {
			lines = append(lines, driver.Line{Cells: []string{row.Config}, Skipped: true, Skip: driver.ShortReason(row.Skipped)})
			continue
		}
		s := row.Summary
		ratio := "-"
		if p := r.probeFor(row); p != nil && row.Kind != KindProbe && p.Summary.Median > 0 {
			ratio = fmt.Sprintf("%.2fx", s.Median/p.Summary.Median)
		}
		lines = append(lines, driver.Line{Cells: []string{row.Config, fmt.Sprint(s.Count),
			fmt.Sprintf("%.1f", s.Min), fmt.Sprintf("%.1f", s.Median), fmt.Sprintf("%.1f", s.Avg),
			fmt.Sprintf("%.1f", s.P99), fmt.Sprintf("%.1f", s.Max), ratio}})
	}
	driver.WriteBox(&b, []string{"config", "n", "min", "p50", "avg", "p99", "max", "p50/probe"}, lines)
	b.WriteString("latencies in us; p50/probe: p50 over the raw probe's p50 of the same policy (FIFO for RT rows and a FIFO queuer)\n")
	if r.Queuer != QueuerFIFO {
		b.WriteString("Go executors and goroutine-backed gowq rows are queued from an ordinary goroutine (unpinned), the other gowq rows from the pinned queuer thread\n")
	}
	raw, rt, rtu, normal := r.get("raw probe SCHED_FIFO"), r.get("gowq RT per-CPU"), r.get("gowq RT unbound strict"), r.get("gowq normal per-CPU")
	best, bestMax := rt, rt
	if rtu != nil && (best == nil || rtu.Summary.P99 < best.Summary.P99) {
		best = rtu
	}
	if rtu != nil && (bestMax == nil || rtu.Summary.Max < bestMax.Summary.Max) {
		bestMax = rtu
	}
	if raw != nil && best != nil {
		ratio := best.Summary.P99 / raw.Summary.P99
		verdict := "within"
		if ratio > 2 {
			verdict = "NOT within"
		}
		fmt.Fprintf(&b, "target 1: RT p99 %.1f us is %.2fx the raw SCHED_FIFO probe's p99 %.1f us: %s 2x\n", best.Summary.P99, ratio, raw.Summary.P99, verdict)
	}
	if normal != nil && best != nil {
		ratio := normal.Summary.P99 / best.Summary.P99
		verdict := "met"
		if ratio < 10 {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, "target 2: normal p99 %.1f us is %.1fx RT's p99 (target >= 10x): %s\n", normal.Summary.P99, ratio, verdict)
	}
	if raw != nil && bestMax != nil {
		goal, qname := 10.0, "SCHED_OTHER"
		if r.Queuer == QueuerFIFO {
			goal, qname = 3, "SCHED_FIFO"
		}
		ratio := bestMax.Summary.Max / raw.Summary.Max
		verdict := "met"
		if ratio > goal {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, "worst case: best RT max %.1f us (%s, n %d) is %.1fx the raw SCHED_FIFO probe's max %.1f us (goal <= %.0fx with a %s queuer): %s\n",
			bestMax.Summary.Max, bestMax.Config, bestMax.Summary.Count, ratio, raw.Summary.Max, goal, qname, verdict)
	}
	if raw != nil && best != nil && r.WQLoad > 0 {
		ratio := best.Summary.P99 / raw.Summary.P99
		verdict := "met"
		if ratio > 3 {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, "beside the default queue: best RT p99 %.1f us (%s) is %.2fx the raw SCHED_FIFO probe's p99 %.1f us (goal <= 3x): %s\n",
			best.Summary.P99, best.Config, ratio, raw.Summary.P99, verdict)
	}
	if r.Explain != nil {
		r.Explain.write(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
