// Package adaptive measures adaptive placement (escape_after):
// per-CPU queues whose items run on the queueing CPU unless no worker
// there starts them within escape_after, against plain per-CPU and
// unbound queues, under seed 004's load (two hogs pinned to one CPU at
// nice -20) and on an idle machine.
//
// It runs on the lab driver (package lab/driver), as `wqlab wake` does:
// the same loads (driver.Loads), the same interleaving (driver.Interleave)
// and box tables (driver.WriteBox). One thread pinned to the hogged CPU
// (nice -20 when permitted, as seed 004's queuer, so that it gets its
// share of that CPU) queues each item with QueueOn(hogged CPU) and blocks
// on a futex until the item has started. Latency is from just before the
// queue call to the first instruction of the work function,
// CLOCK_MONOTONIC, in us; locality is the share of items whose function
// started on the queueing CPU.
package adaptive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

// Name is the experiment's name: the wqlab subcommand, and the schema
// of its JSON document is driver.Schema(Name).
const Name = "adaptive"

// Load names an antagonist.
type Load string

// The loads.
const (
	LoadHog  Load = "hog"  // seed 004: two hogs pinned to the queueing CPU at nice -20
	LoadNone Load = "none" // idle machine
)

// Defaults of Options.
const (
	DefaultSamples = 500
	DefaultGap     = 200 * time.Microsecond
	DefaultSlice   = 25
	MaxSamples     = 1_000_000
)

// Options shape a run. The zero value measures both loads with the
// defaults.
type Options struct {
	Loads   []Load        // loads to measure, in order (nil: hog, then none)
	Samples int           // samples per row and load (0: DefaultSamples)
	Gap     time.Duration // pause between two samples of a row (0: DefaultGap)
	Slice   int           // samples per row per round (0: DefaultSlice)
	// Configs, when not empty, selects rows by name (Configs()).
	Configs  []string
	Progress func(done, total int)
}

type config struct {
	name   string
	flags  wq.Flags
	escape time.Duration
}

var configs = []config{
	{name: "normal per-CPU", flags: wq.PerCPU},
	{name: "normal unbound", flags: wq.Unbound},
	{name: "normal per-CPU esc 20us", flags: wq.PerCPU, escape: 20 * time.Microsecond},
	{name: "normal per-CPU esc 50us", flags: wq.PerCPU, escape: 50 * time.Microsecond},
	{name: "normal per-CPU esc 200us", flags: wq.PerCPU, escape: 200 * time.Microsecond},
	{name: "RT per-CPU", flags: wq.PerCPU | wq.RT},
	{name: "RT unbound strict", flags: wq.Unbound | wq.RT},
	{name: "RT per-CPU esc 20us", flags: wq.PerCPU | wq.RT, escape: 20 * time.Microsecond},
	{name: "RT per-CPU esc 50us", flags: wq.PerCPU | wq.RT, escape: 50 * time.Microsecond},
	{name: "RT per-CPU esc 200us", flags: wq.PerCPU | wq.RT, escape: 200 * time.Microsecond},
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
var ErrInvalidOption = driver.InvalidOption("adaptive")

// Validate checks o without running anything.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

func (o Options) normalize() (Options, error) {
	c, err := driver.Counted{Samples: o.Samples, Gap: o.Gap, Slice: o.Slice}.Normalize(
		driver.Counted{Samples: DefaultSamples, Gap: DefaultGap, Slice: DefaultSlice}, MaxSamples, ErrInvalidOption)
	o.Samples, o.Gap, o.Slice = c.Samples, c.Gap, c.Slice
	if len(o.Loads) == 0 {
		o.Loads = []Load{LoadHog, LoadNone}
	}
	if err != nil {
		return o, err
	}
	for _, l := range o.Loads {
		if l != LoadHog && l != LoadNone {
			return o, fmt.Errorf("%w: unknown load %q (want hog or none)", ErrInvalidOption, l)
		}
	}
	return o, driver.CheckConfigs(o.Configs, Configs(), ErrInvalidOption)
}

func (o Options) wants(name string) bool { return driver.Wants(o.Configs, name) }

// Row is one configuration's result under one load.
type Row struct {
	Config   string        `json:"config"`
	EscapeUs int64         `json:"escape_after_us"` // 0: not an adaptive row
	Skipped  string        `json:"skipped,omitempty"`
	Summary  stats.Summary `json:"summary"`  // queue-to-start, us
	Local    float64       `json:"local"`    // share of items started on the queueing CPU, 0..1
	Escaped  int64         `json:"escaped"`  // ESC of the row's queue
	CPUs     []int64       `json:"per_cpu"`  // items started per CPU
	Measured int64         `json:"measured"` // samples measured
}

// Table is one load's rows.
type Table struct {
	Load     Load      `json:"load"`
	LoadName string    `json:"load_name,omitempty"`
	LoadNote string    `json:"load_note,omitempty"`
	LoadPct  []float64 `json:"load_pct_per_cpu"`
	Rows     []Row     `json:"rows"`
}

// Result is a whole run.
type Result struct {
	driver.Doc         // schema: driver.Schema(Name), set by WriteJSON
	CPU        int     `json:"cpu"`       // the queueing (and hogged) CPU
	QueuerOn   string  `json:"queuer_on"` // how the queueing thread ran
	Samples    int     `json:"samples"`
	Tables     []Table `json:"tables"`
}

type row struct {
	c       config
	res     *Row
	samples *stats.Samples
	perCPU  map[int]int64
	q       *wq.Workqueue
}

// Experiment returns `wqlab adaptive` with options o as a driver.Experiment
// named Name: its Validate is o.Validate, its Run is Run(ctx, o) and
// its Result a *Result.
func Experiment(o Options) driver.Experiment {
	run := func(ctx context.Context) (*Result, error) { return Run(ctx, o) }
	return driver.Func[*Result]{ID: Name, Rows: Configs(), Check: o.Validate, Measure: run}
}

// Run measures every selected configuration under each load. It blocks
// for about loads * rows * Samples * (Gap + latency); under the hog a
// plain per-CPU normal row waits for the hogged CPU (milliseconds per
// item). Rows that need a privilege this process lacks (RT) are skipped
// with the reason; a load that cannot start is noted. When ctx ends Run
// returns ctx.Err().
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	online := wq.OnlineCPUs()
	cpu := online[0]
	qr, err := startQueuer(cpu)
	if err != nil {
		return nil, err
	}
	defer qr.stop()
	res := &Result{CPU: cpu, QueuerOn: qr.desc, Samples: o.Samples}
	loads := &driver.Loads{HogCPU: cpu}
	defer loads.Close()
	total := len(o.Loads) * len(configs) * o.Samples
	done := 0
	for _, l := range o.Loads {
		kind := driver.LoadNone
		if l == LoadHog {
			kind = driver.LoadHog
		}
		loads.Ensure(kind, 200*time.Millisecond)
		tab := Table{Load: l, LoadName: loads.Name(), LoadNote: loads.Note()}
		var rows []*row
		for _, c := range configs {
			if !o.wants(c.name) {
				continue
			}
			r := &row{c: c, res: &Row{Config: c.name, EscapeUs: c.escape.Microseconds()}, samples: stats.NewSamples(0), perCPU: map[int]int64{}}
			rows = append(rows, r)
			var opts []wq.Option
			if c.escape > 0 {
				opts = append(opts, wq.WithEscapeAfter(c.escape))
			}
			q, err := wq.Alloc("adaptive", c.flags, 0, opts...)
			if err != nil {
				if errors.Is(err, wq.ErrPermission) {
					r.res.Skipped = err.Error()
					continue
				}
				return nil, err
			}
			r.q = q
		}
		probe0 := loads.Probe()
		driver.Interleave(ctx, len(rows), 0, func(i, _ int) bool {
			r := rows[i]
			n := min(o.Slice, o.Samples-int(r.samples.Len()))
			if n <= 0 || r.res.Skipped != "" {
				return false
			}
			qr.measure(r, n, o.Gap)
			done += n
			if o.Progress != nil {
				o.Progress(done, total)
			}
			return true
		})
		for _, r := range rows {
			if r.q != nil {
				r.res.Escaped = r.q.Stats().ESC
				r.q.Destroy()
			}
			if r.res.Skipped == "" {
				r.res.Summary = r.samples.Summary()
				r.res.Measured = r.samples.Len()
				if r.res.Measured > 0 {
					r.res.Local = float64(r.perCPU[cpu]) / float64(r.res.Measured)
				}
				for _, c := range online {
					r.res.CPUs = append(r.res.CPUs, r.perCPU[c])
				}
			}
			tab.Rows = append(tab.Rows, *r.res)
		}
		f := loads.Read(probe0)
		for _, c := range f.PerCPU {
			tab.LoadPct = append(tab.LoadPct, c.BusyPct)
		}
		tab.LoadNote = driver.JoinNote(tab.LoadNote, f.Note)
		res.Tables = append(res.Tables, tab)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// queuer is the thread that queues every item: locked, pinned to the
// queueing CPU, nice -20 when permitted.
type queuer struct {
	*driver.Thread
	cpu  int
	desc string
}

func startQueuer(cpu int) (*queuer, error) {
	q := &queuer{cpu: cpu}
	t, err := driver.StartThread(func() error {
		q.desc = fmt.Sprintf("pinned to cpu%d", cpu)
		if err := labsys.SetThreadAffinity([]int{cpu}); err != nil {
			q.desc = fmt.Sprintf("not pinned (%v)", err)
		}
		if err := labsys.SetThreadAttr(labsys.ThreadAttr{Policy: labsys.ThreadNormal, Nice: -20}); err != nil {
			q.desc += ", nice 0"
		} else {
			q.desc += ", nice -20"
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

// measure records n samples of r on the queuer thread: queue, block on a
// futex until the item has started, wait until it is idle, sleep gap.
func (q *queuer) measure(r *row, n int, gap time.Duration) {
	q.Do(func() {
		var start atomic.Int64
		var where atomic.Int32
		var pk labsys.Parker
		w := wq.NewWork(func() {
			start.Store(stats.Now())
			where.Store(int32(labsys.CurrentCPU()))
			pk.Unpark()
		})
		for range n {
			if gap > 0 {
				labsys.SleepThread(gap)
			}
			start.Store(0)
			t0 := stats.Now()
			if !r.q.QueueOn(q.cpu, w) {
				continue
			}
			for start.Load() == 0 {
				pk.Park()
			}
			r.samples.Add(start.Load() - t0)
			r.perCPU[int(where.Load())]++
			for w.Busy() != 0 {
				labsys.SleepThread(10 * time.Microsecond)
			}
		}
	})
}

// get returns the measured row named name (driver.Measured), nil if none.
func (r *Table) get(name string) *Row { return driver.Measured(r.Rows, name, rowKey) }

func rowKey(r *Row) (string, string, int64) { return r.Config, r.Skipped, r.Summary.Count }

// WriteJSON writes r as one indented JSON document whose "schema" is
// driver.Schema(Name) (adaptive's fields: Result's JSON tags, latencies
// in us). It returns w's error.
func (r *Result) WriteJSON(w io.Writer) error {
	return driver.WriteResult(w, Name, r)
}

// WriteTable prints each load's box table (p50, p99, max queue-to-start
// in us, locality, ESC) and the goals: under the hog, each adaptive row's
// p99 within 1.5x of the unbound row of its class; idle, each adaptive
// row's locality at least 95% and its p50 within 1.1x of the per-CPU row
// of its class. It returns w's error.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "adaptive placement: queue-to-start (us) of items queued on cpu%d; queuer %s\n", r.CPU, r.QueuerOn)
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\nload: %s", t.Load)
		driver.WriteLoad(&b, string(t.Load), t.LoadName, t.LoadPct)
		b.WriteByte('\n')
		if t.LoadNote != "" {
			fmt.Fprintf(&b, "note: %s\n", t.LoadNote)
		}
		var lines []driver.Line
		for i := range t.Rows {
			row := &t.Rows[i]
			if row.Skipped != "" {
				lines = append(lines, driver.Line{Cells: []string{row.Config}, Skipped: true, Skip: driver.ShortReason(row.Skipped)})
				continue
			}
			s := row.Summary
			lines = append(lines, driver.Line{Cells: []string{row.Config, fmt.Sprint(s.Count),
				fmt.Sprintf("%.1f", s.Median), fmt.Sprintf("%.1f", s.P99), fmt.Sprintf("%.1f", s.Max),
				fmt.Sprintf("%.1f%%", 100*row.Local), fmt.Sprint(row.Escaped)}})
		}
		driver.WriteBox(&b, []string{"config", "n", "p50", "p99", "max", "local", "ESC"}, lines)
		for _, class := range []string{"normal", "RT"} {
			pcpu := t.get(class + " per-CPU")
			unb := t.get(class + " unbound")
			if unb == nil {
				unb = t.get(class + " unbound strict")
			}
			for i := range t.Rows {
				row := &t.Rows[i]
				if row.EscapeUs == 0 || row.Skipped != "" || !strings.HasPrefix(row.Config, class+" ") || row.Summary.Count == 0 {
					continue
				}
				switch t.Load {
				case LoadHog:
					if unb == nil {
						continue
					}
					ratio := row.Summary.P99 / unb.Summary.P99
					fmt.Fprintf(&b, "goal (hog): %s p99 %.1f us is %.2fx %s's %.1f us: %s 1.5x\n",
						row.Config, row.Summary.P99, ratio, unb.Config, unb.Summary.P99, verdict(ratio <= 1.5, "within", "NOT within"))
				case LoadNone:
					if pcpu == nil {
						continue
					}
					ratio := row.Summary.Median / pcpu.Summary.Median
					fmt.Fprintf(&b, "goal (idle): %s locality %.1f%% (%s 95%%), p50 %.1f us is %.2fx %s's %.1f us (%s 1.1x)\n",
						row.Config, 100*row.Local, verdict(row.Local >= 0.95, "met", "NOT met"), row.Summary.Median, ratio,
						pcpu.Config, pcpu.Summary.Median, verdict(ratio <= 1.1, "within", "NOT within"))
				}
			}
		}
	}
	b.WriteString("\nlocal: share of items whose function started on the queueing CPU; ESC: items the escaper ran elsewhere (the escaper: the queue's rescuer-like thread that runs an item on another CPU when no worker of its own CPU started it within escape_after)\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}
