// Package wake measures queue-to-start latency of every gowq worker class
// against the raw wake-up probe (two C threads handing a token through a
// futex, internal/sched/probe), under CPU load: issue 3's measurement of
// the wake path.
//
// All configurations run in the same process under the same load,
// interleaved in rounds of short slices so that drift in the machine's load
// affects every row alike. Latency is from just before the queue call (or
// futex_wake for the probe) to the first instruction of the work function
// (or the waiter's return from futex_wait), CLOCK_MONOTONIC, in us.
package wake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/sched/probe"
	"github.com/gowq/wq/lab/antagonist"
	"github.com/gowq/wq/lab/stats"
)

// Load names an antagonist.
type Load string

// The loads.
const (
	LoadNone    Load = "none"    // idle machine
	LoadBurners Load = "burners" // 8 cpuio qsort burners at 90% (seed 000)
	LoadHogs    Load = "hogs"    // one nice -20 hog pinned to each CPU
)

// Options shape a run.
type Options struct {
	Load     Load
	Samples  int           // samples per configuration (default 2000)
	Gap      time.Duration // pause between two samples of one configuration (default 200 us)
	Slice    int           // samples per configuration per round (default 100)
	Progress func(done, total int)
}

// Row is one configuration's result.
type Row struct {
	Config  string        `json:"config"`
	Skipped string        `json:"skipped,omitempty"` // reason, when not measured
	Summary stats.Summary `json:"summary"`           // us
}

// Result is a whole run.
type Result struct {
	Load    Load      `json:"load"`
	LoadPct []float64 `json:"load_pct_per_cpu"`
	Rows    []Row     `json:"rows"`
}

type config struct {
	name  string
	flags wq.Flags
	probe probe.Policy
	raw   bool
}

var configs = []config{
	{name: "raw probe SCHED_FIFO", raw: true, probe: probe.FIFO},
	{name: "raw probe SCHED_OTHER", raw: true, probe: probe.Other},
	{name: "gowq RT per-CPU", flags: wq.PerCPU | wq.RT},
	{name: "gowq RT unbound strict", flags: wq.Unbound | wq.RT},
	{name: "gowq highpri per-CPU", flags: wq.PerCPU | wq.HighPri},
	{name: "gowq normal per-CPU", flags: wq.PerCPU},
	{name: "gowq normal unbound", flags: wq.Unbound},
}

// Run measures every configuration. It blocks for about
// len(configs) * Samples * (Gap + latency). Errors: an invalid option or a
// load that cannot start.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Samples == 0 {
		o.Samples = 2000
	}
	if o.Gap == 0 {
		o.Gap = 200 * time.Microsecond
	}
	if o.Slice == 0 {
		o.Slice = 100
	}
	if o.Samples < 1 || o.Slice < 1 || o.Gap < 0 {
		return nil, fmt.Errorf("wake: invalid options %+v", o)
	}
	res := &Result{Load: o.Load}
	var group *antagonist.Group
	var err error
	switch o.Load {
	case LoadNone, "":
		res.Load = LoadNone
	case LoadBurners:
		group, err = antagonist.Burners(antagonist.BurnerSpec{Jobs: 8, LoadPct: 90, Mode: antagonist.ModeQsort})
	case LoadHogs:
		group, err = startHogs()
	default:
		return nil, fmt.Errorf("wake: unknown load %q (none, burners, hogs)", o.Load)
	}
	if err != nil {
		return nil, fmt.Errorf("wake: start %s: %w", o.Load, err)
	}
	if group != nil {
		defer group.Stop()
		time.Sleep(200 * time.Millisecond) // let the load settle
	}
	meter, _ := antagonist.StartLoadMeter()

	rows := make([]Row, len(configs))
	samples := make([]*stats.Samples, len(configs))
	queues := make([]*wq.Workqueue, len(configs))
	for i, c := range configs {
		rows[i].Config = c.name
		samples[i] = stats.NewSamples(0)
		if c.raw {
			if c.probe == probe.FIFO {
				if err := sched.CheckRT(1); err != nil {
					rows[i].Skipped = err.Error()
				}
			}
			continue
		}
		q, err := wq.Alloc("wake", c.flags, 0)
		if err != nil {
			if errors.Is(err, wq.ErrPermission) {
				rows[i].Skipped = err.Error()
				continue
			}
			return nil, err
		}
		queues[i] = q
		defer q.Destroy()
	}
	// Every configuration wakes its worker from a thread pinned to the same
	// CPU, and the probe's two threads share it too: the wake-up is a
	// same-CPU preemption in every row (a cross-CPU wake of an idle
	// virtual CPU costs an IPI, 20-40 us on this kind of machine).
	online := wq.OnlineCPUs()
	cpu := online[len(online)-1]
	total := len(configs) * o.Samples
	done := 0
	for round := 0; done < total; round++ {
		progressed := false
		for k := range configs {
			i := (k + round) % len(configs)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			n := min(o.Slice, o.Samples-int(samples[i].Len()))
			if n <= 0 || rows[i].Skipped != "" {
				continue
			}
			progressed = true
			if configs[i].raw {
				lat, err := probe.Run(probe.Options{N: n, Policy: configs[i].probe, Priority: 1, WaiterCPU: cpu, WakerCPU: cpu, Gap: o.Gap})
				if err != nil {
					rows[i].Skipped = err.Error()
					continue
				}
				for _, v := range lat {
					samples[i].Add(v)
				}
			} else {
				measureQueue(queues[i], cpu, n, o.Gap, samples[i])
			}
			done += n
			if o.Progress != nil {
				o.Progress(done, total)
			}
		}
		if !progressed {
			break
		}
	}
	for i := range rows {
		if rows[i].Skipped == "" {
			rows[i].Summary = samples[i].Summary()
		}
	}
	res.Rows = rows
	if meter != nil {
		if l, err := meter.Read(); err == nil {
			for _, c := range l.PerCPU {
				res.LoadPct = append(res.LoadPct, c.BusyPct)
			}
		}
	}
	return res, nil
}

// startHogs pins one nice -20 hog to each online CPU (seed 004's
// antagonist, on every CPU).
func startHogs() (*antagonist.Group, error) {
	cpus := wq.OnlineCPUs()
	var groups []*antagonist.Group
	for _, c := range cpus {
		g, err := antagonist.Hog(antagonist.HogSpec{CPU: c, Procs: 1, Nice: -20})
		if err != nil {
			for _, g := range groups {
				g.Stop()
			}
			return nil, err
		}
		groups = append(groups, g)
	}
	if len(groups) == 1 {
		return groups[0], nil
	}
	// Keep the others alive with the first: stop them all together.
	go func() {
		<-groups[0].Done()
		for _, g := range groups[1:] {
			g.Stop()
		}
	}()
	return groups[0], nil
}

// measureQueue queues one work item n times, gap apart, from a thread
// pinned to cpu, and records queue-to-start.
func measureQueue(q *wq.Workqueue, cpu, n int, gap time.Duration, s *stats.Samples) {
	done := make(chan struct{})
	sched.GoLocked(func() {
		defer close(done)
		_ = sched.SetAffinity(0, []int{cpu})
		var start atomic.Int64
		w := wq.NewWork(func() { start.Store(stats.Now()) })
		for i := 0; i < n; i++ {
			if gap > 0 {
				time.Sleep(gap)
			}
			start.Store(0)
			t0 := stats.Now()
			q.Queue(w)
			for start.Load() == 0 {
				runtime.Gosched()
			}
			s.Add(start.Load() - t0)
			for w.Busy() != 0 {
				runtime.Gosched()
			}
		}
	})
	<-done
}

// WriteTable prints the result like the seeds' tables, with the issue's
// two ratios: RT p99 against the raw SCHED_FIFO probe's p99, and the
// normal class's p99 against RT's.
func (r *Result) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "queue-to-start latency, load: %s", r.Load)
	if len(r.LoadPct) > 0 {
		parts := make([]string, len(r.LoadPct))
		for i, p := range r.LoadPct {
			parts[i] = fmt.Sprintf("cpu%d %.0f%%", i, p)
		}
		fmt.Fprintf(w, " (CPUs busy: %s)", strings.Join(parts, " "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tn\tmin\tp50\tavg\tp99\tmax\t")
	for _, row := range r.Rows {
		if row.Skipped != "" {
			fmt.Fprintf(tw, "%s\tskipped: %s\t\t\t\t\t\t\n", row.Config, firstLine(row.Skipped))
			continue
		}
		s := row.Summary
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", row.Config, s.Count, s.Min, s.Median, s.Avg, s.P99, s.Max)
	}
	tw.Flush()
	fmt.Fprintln(w, "latencies in us")
	get := func(name string) *stats.Summary {
		for _, row := range r.Rows {
			if row.Config == name && row.Skipped == "" {
				s := row.Summary
				return &s
			}
		}
		return nil
	}
	raw, rt, rtu, normal := get("raw probe SCHED_FIFO"), get("gowq RT per-CPU"), get("gowq RT unbound strict"), get("gowq normal per-CPU")
	best := rt
	if rtu != nil && (best == nil || rtu.P99 < best.P99) {
		best = rtu
	}
	if raw != nil && best != nil {
		ratio := best.P99 / raw.P99
		verdict := "within"
		if ratio > 2 {
			verdict = "NOT within"
		}
		fmt.Fprintf(w, "target 1: RT p99 %.1f us is %.2fx the raw SCHED_FIFO probe's p99 %.1f us: %s 2x\n", best.P99, ratio, raw.P99, verdict)
	}
	if normal != nil && best != nil {
		ratio := normal.P99 / best.P99
		verdict := "met"
		if ratio < 10 {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "target 2: normal p99 %.1f us is %.1fx RT's p99 (target >= 10x): %s\n", normal.P99, ratio, verdict)
	}
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
