// Package adaptive measures adaptive placement (escape_after, issue 11):
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
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

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
// option; test with errors.Is.
var ErrInvalidOption = errors.New("adaptive: invalid option")

// Validate checks o without running anything.
func (o Options) Validate() error {
	_, err := o.normalize()
	return err
}

func (o Options) normalize() (Options, error) {
	if o.Samples == 0 {
		o.Samples = DefaultSamples
	}
	if o.Gap == 0 {
		o.Gap = DefaultGap
	}
	if o.Slice == 0 {
		o.Slice = DefaultSlice
	}
	if len(o.Loads) == 0 {
		o.Loads = []Load{LoadHog, LoadNone}
	}
	switch {
	case o.Samples < 1 || o.Samples > MaxSamples:
		return o, fmt.Errorf("%w: samples %d (want 1..%d)", ErrInvalidOption, o.Samples, MaxSamples)
	case o.Slice < 1:
		return o, fmt.Errorf("%w: slice %d (want >= 1)", ErrInvalidOption, o.Slice)
	case o.Gap < 0:
		return o, fmt.Errorf("%w: negative gap %v", ErrInvalidOption, o.Gap)
	}
	for _, l := range o.Loads {
		if l != LoadHog && l != LoadNone {
			return o, fmt.Errorf("%w: unknown load %q (want hog or none)", ErrInvalidOption, l)
		}
	}
	for _, n := range o.Configs {
		found := false
		for _, c := range configs {
			found = found || c.name == n
		}
		if !found {
			return o, fmt.Errorf("%w: unknown config %q (want one of: %s)", ErrInvalidOption, n, strings.Join(Configs(), ", "))
		}
	}
	return o, nil
}

func (o Options) wants(name string) bool {
	if len(o.Configs) == 0 {
		return true
	}
	for _, n := range o.Configs {
		if n == name {
			return true
		}
	}
	return false
}

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
	CPU      int     `json:"cpu"`       // the queueing (and hogged) CPU
	QueuerOn string  `json:"queuer_on"` // how the queueing thread ran
	Samples  int     `json:"samples"`
	Tables   []Table `json:"tables"`
}

type row struct {
	c       config
	res     *Row
	samples *stats.Samples
	perCPU  map[int]int64
	q       *wq.Workqueue
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
				opts = append(opts, wq.EscapeAfter(c.escape))
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
	cpu  int
	desc string
	reqs chan func()
}

func startQueuer(cpu int) (*queuer, error) {
	q := &queuer{cpu: cpu, reqs: make(chan func())}
	ready := make(chan struct{})
	err := sched.GoLocked(func() {
		q.desc = fmt.Sprintf("pinned to cpu%d", cpu)
		if err := sched.SetAffinity(0, []int{cpu}); err != nil {
			q.desc = fmt.Sprintf("not pinned (%v)", err)
		}
		if err := sched.SetAttr(0, sched.Attr{Policy: sched.PolicyNormal, Nice: -20}); err != nil {
			q.desc += ", nice 0"
		} else {
			q.desc += ", nice -20"
		}
		close(ready)
		for fn := range q.reqs {
			fn()
		}
	})
	if err != nil {
		return nil, err
	}
	<-ready
	return q, nil
}

func (q *queuer) stop() { close(q.reqs) }

// measure records n samples of r on the queuer thread: queue, block on a
// futex until the item has started, wait until it is idle, sleep gap.
func (q *queuer) measure(r *row, n int, gap time.Duration) {
	done := make(chan struct{})
	q.reqs <- func() {
		defer close(done)
		var start atomic.Int64
		var where atomic.Int32
		var pk sched.Parker
		w := wq.NewWork(func() {
			start.Store(stats.Now())
			where.Store(int32(sched.GetCPU()))
			pk.Unpark()
		})
		for range n {
			if gap > 0 {
				sched.Nanosleep(int64(gap))
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
				sched.Nanosleep(10_000)
			}
		}
	}
	<-done
}

func (r *Table) get(name string) *Row {
	for i := range r.Rows {
		if r.Rows[i].Config == name && r.Rows[i].Skipped == "" && r.Rows[i].Summary.Count > 0 {
			return &r.Rows[i]
		}
	}
	return nil
}

// WriteTable prints each load's box table (p50, p99, max queue-to-start
// in us, locality, ESC) and the goals: under the hog, each adaptive row's
// p99 within 1.5x of the unbound row of its class; idle, each adaptive
// row's locality at least 95% and its p50 within 1.1x of the per-CPU row
// of its class.
func (r *Result) WriteTable(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "adaptive placement: queue-to-start (us) of items queued on cpu%d; queuer %s\n", r.CPU, r.QueuerOn)
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\nload: %s", t.Load)
		if t.LoadName != "" && t.LoadName != string(t.Load) {
			fmt.Fprintf(&b, " (%s)", t.LoadName)
		}
		if len(t.LoadPct) > 0 {
			parts := make([]string, len(t.LoadPct))
			for i, p := range t.LoadPct {
				parts[i] = fmt.Sprintf("cpu%d %.0f%%", i, p)
			}
			fmt.Fprintf(&b, " (CPUs busy: %s)", strings.Join(parts, " "))
		}
		b.WriteByte('\n')
		if t.LoadNote != "" {
			fmt.Fprintf(&b, "note: %s\n", t.LoadNote)
		}
		var lines []driver.Line
		for i := range t.Rows {
			row := &t.Rows[i]
			if row.Skipped != "" {
				lines = append(lines, driver.Line{Cells: []string{row.Config}, Skipped: true, Skip: firstLine(row.Skipped)})
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
	b.WriteString("\nlocal: share of items whose function started on the queueing CPU; ESC: items the escaper ran elsewhere\n")
	io.WriteString(w, b.String())
}

func verdict(ok bool, yes, no string) string {
	if ok {
		return yes
	}
	return no
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 && i < 60 {
		return s[:i]
	}
	if len(s) > 60 {
		return s[:60]
	}
	return s
}
