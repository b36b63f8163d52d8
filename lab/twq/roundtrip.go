package twq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/baseline"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

// Defaults of RoundTripOptions.
const (
	DefaultRoundTripSamples = 5000
	DefaultRoundTripGap     = 100 * time.Microsecond
	roundTripSlice          = 100
	maxRoundTripSamples     = 1_000_000
)

// ErrInvalidOption is returned for a bad option of any experiment of this
// package; test with errors.Is. It wraps driver.ErrInvalidOption.
var ErrInvalidOption = driver.InvalidOption("twq")

// RoundTripName is the round trip's experiment name: the wqlab
// subcommand, and the schema of its JSON document is
// driver.Schema(RoundTripName).
const RoundTripName = "roundtrip"

// RoundTripOptions shape RunRoundTrip. The zero value takes the defaults.
type RoundTripOptions struct {
	Samples int           // samples per row (0: DefaultRoundTripSamples; 1..1e6)
	Gap     time.Duration // pause between two samples of a row (0: DefaultRoundTripGap)
	// Configs, when not empty, selects rows by name (RoundTripConfigs()).
	Configs []string
}

// RoundTripRow is one executor's figures, in us: QueueStart from just
// before the queue call to the item's first instruction; Wake from the
// item's channel send to the waiting goroutine's return from its receive;
// RoundTrip from just before the queue call to that return.
type RoundTripRow struct {
	Config     string        `json:"config"`
	Skipped    string        `json:"skipped,omitempty"`
	QueueStart stats.Summary `json:"queue_start"`
	Wake       stats.Summary `json:"wake"`
	RoundTrip  stats.Summary `json:"round_trip"`
	// SchedLatP50 and SchedLatP99 are the runtime's own run-queue wait
	// (/sched/latencies: runnable to running, every goroutine of the
	// process, the waiter dominant) over the row's samples, us, at the
	// histogram's bucket bounds.
	SchedLatP50 float64 `json:"sched_latency_p50_us"`
	SchedLatP99 float64 `json:"sched_latency_p99_us"`
}

// RoundTripResult is a whole run.
type RoundTripResult struct {
	driver.Doc                // schema: driver.Schema(RoundTripName), set by WriteJSON
	Samples    int            `json:"samples"`
	GOMAXPROCS int            `json:"gomaxprocs"`
	Rows       []RoundTripRow `json:"rows"`
}

type rtConfig struct {
	name  string
	flags wq.Flags // gowq rows
	exec  string   // Go executors: baseline.New name
}

var rtConfigs = []rtConfig{
	{name: "go statement", exec: "go"},
	{name: "ants/v2", exec: "ants"},
	{name: "gowq normal unbound", flags: wq.Unbound},
	{name: "gowq normal per-CPU", flags: wq.PerCPU},
	{name: "gowq RT per-CPU", flags: wq.PerCPU | wq.RT},
	{name: "gowq RT unbound strict", flags: wq.Unbound | wq.RT},
}

// RoundTripConfigs returns the round-trip rows' names, in table order.
func RoundTripConfigs() []string {
	out := make([]string, len(rtConfigs))
	for i, c := range rtConfigs {
		out[i] = c.name
	}
	return out
}

// Validate checks o without running anything, after defaults: an error
// wrapping ErrInvalidOption that names the bad value, or nil.
func (o RoundTripOptions) Validate() error {
	_, err := o.normalize()
	return err
}

func (o RoundTripOptions) normalize() (RoundTripOptions, error) {
	c, err := driver.Counted{Samples: o.Samples, Gap: o.Gap, Slice: roundTripSlice}.Normalize(
		driver.Counted{Samples: DefaultRoundTripSamples, Gap: DefaultRoundTripGap, Slice: roundTripSlice}, maxRoundTripSamples, ErrInvalidOption)
	o.Samples, o.Gap = c.Samples, c.Gap
	if err != nil {
		return o, err
	}
	return o, driver.CheckConfigs(o.Configs, RoundTripConfigs(), ErrInvalidOption)
}

func (o RoundTripOptions) wants(name string) bool { return driver.Wants(o.Configs, name) }

// RoundTripExperiment returns `wqlab roundtrip` with options o as a
// driver.Experiment named RoundTripName: its Validate is o.Validate, its
// Run is RunRoundTrip(ctx, o) and its Result a *RoundTripResult.
func RoundTripExperiment(o RoundTripOptions) driver.Experiment {
	run := func(ctx context.Context) (*RoundTripResult, error) { return RunRoundTrip(ctx, o) }
	return driver.Func[*RoundTripResult]{ID: RoundTripName, Rows: RoundTripConfigs(), Check: o.Validate, Measure: run}
}

// rtRow is one row while it runs.
type rtRow struct {
	res            *RoundTripRow
	qs, wake, trip *stats.Samples
	submit         func(fn func()) error
	sched          []uint64 // /sched/latencies counts accumulated over the row's slices
}

// schedLat reads the runtime's /sched/latencies histogram.
func schedLat(s []metrics.Sample) *metrics.Float64Histogram {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// histPct returns the p-th percentile (0..100) of counts over buckets, the
// upper bound of its bucket, in us.
func histPct(counts []uint64, buckets []float64, p float64) float64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(p / 100 * float64(n)))
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= rank {
			v := buckets[i+1]
			if math.IsInf(v, 1) {
				v = buckets[i]
			}
			return v * 1e6
		}
	}
	return 0
}

// RunRoundTrip measures the round trip: a plain goroutine (not
// locked, not pinned) queues one item and waits on a channel; the item
// stamps its start and sends on that channel. Rows are interleaved in
// slices of 100 samples. It blocks for about rows * Samples * (Gap + the
// round trip). Errors: an invalid option (ErrInvalidOption), a queue or
// executor that cannot be made for another reason than privilege (a row
// that needs a privilege is skipped with the reason), ctx.Err().
func RunRoundTrip(ctx context.Context, o RoundTripOptions) (*RoundTripResult, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	res := &RoundTripResult{Samples: o.Samples, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	var rows []*rtRow
	for _, c := range rtConfigs {
		if !o.wants(c.name) {
			continue
		}
		r := &rtRow{res: &RoundTripRow{Config: c.name},
			qs: stats.NewSamples(0), wake: stats.NewSamples(0), trip: stats.NewSamples(0)}
		rows = append(rows, r)
		if c.exec != "" {
			e, err := baseline.New(c.exec, max(2, runtime.NumCPU()))
			if err != nil {
				return nil, err
			}
			defer e.Close()
			r.submit = e.Submit
			continue
		}
		q, err := wq.Alloc("roundtrip", c.flags, 0)
		if err != nil {
			if errors.Is(err, wq.ErrPermission) {
				r.res.Skipped = err.Error()
				continue
			}
			return nil, err
		}
		defer q.Destroy()
		r.submit = func(fn func()) error {
			w := wq.NewWork(fn)
			if !q.Queue(w) {
				return fmt.Errorf("twq: %s: a fresh item was not queued", c.name)
			}
			return nil
		}
	}
	done := make(chan struct{}, 1)
	var start, sent int64
	ms := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	var buckets []float64
	driver.Interleave(ctx, len(rows), 0, func(i, _ int) bool {
		r := rows[i]
		n := min(roundTripSlice, o.Samples-int(r.trip.Len()))
		if n <= 0 || r.res.Skipped != "" {
			return false
		}
		item := func() {
			start = labsys.MonotonicNow()
			sent = start
			done <- struct{}{}
		}
		h0 := schedLat(ms)
		var c0 []uint64
		if h0 != nil {
			c0 = slices.Clone(h0.Counts)
		}
		for range n {
			time.Sleep(o.Gap)
			t0 := labsys.MonotonicNow()
			if err := r.submit(item); err != nil {
				r.res.Skipped = err.Error()
				return false
			}
			<-done
			t2 := labsys.MonotonicNow()
			r.qs.Add(start - t0)
			r.wake.Add(t2 - sent)
			r.trip.Add(t2 - t0)
		}
		if h1 := schedLat(ms); h1 != nil && len(h1.Counts) == len(c0) {
			buckets = h1.Buckets
			if r.sched == nil {
				r.sched = make([]uint64, len(c0))
			}
			for k := range c0 {
				r.sched[k] += h1.Counts[k] - c0[k]
			}
		}
		return true
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for _, r := range rows {
		if r.res.Skipped == "" {
			r.res.QueueStart = r.qs.Summary()
			r.res.Wake = r.wake.Summary()
			r.res.RoundTrip = r.trip.Summary()
			r.res.SchedLatP50 = histPct(r.sched, buckets, 50)
			r.res.SchedLatP99 = histPct(r.sched, buckets, 99)
		}
		res.Rows = append(res.Rows, *r.res)
	}
	return res, nil
}

// WriteJSON writes the run as one indented JSON document, the round
// trip's (schema driver.Schema(RoundTripName), RoundTripResult's JSON
// tags, us). It returns w's error.
func (r *RoundTripResult) WriteJSON(w io.Writer) error {
	return driver.WriteResult(w, RoundTripName, r)
}

// WriteTable prints the run as a box table (us) with each row's goal
// check: round-trip p50 within 2 us of queue->start p50, round-trip p99 at
// most 2x queue->start p99.
func (r *RoundTripResult) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "round trip: a plain goroutine queues one item and waits on a channel the item sends on; %d samples per row, GOMAXPROCS %d, us\n", r.Samples, r.GOMAXPROCS)
	b.WriteString("wake: from the item's send to the waiter's return; sched lat: the runtime's /sched/latencies over the row (runnable to running, bucket bounds)\n")
	b.WriteString("qs: queue->start; goals for every gowq row: round trip p50 - qs p50 <= 2 us, round trip p99 / qs p99 <= 2x (the goal column)\n")
	heads := []string{"row", "queue->start p50", "qs p99", "wake p50", "wake p99", "round trip p50", "round trip p99", "p50 - qs p50", "p99 / qs p99", "goal", "sched lat p50", "sched lat p99"}
	var lines []driver.Line
	for _, row := range r.Rows {
		if row.Skipped != "" {
			lines = append(lines, driver.Line{Cells: []string{row.Config}, Skipped: true, Skip: row.Skipped})
			continue
		}
		qs, wk, rt := row.QueueStart, row.Wake, row.RoundTrip
		ratio, goal := "-", "-"
		if qs.P99 > 0 {
			ratio = fmt.Sprintf("%.2fx", rt.P99/qs.P99)
		}
		if strings.HasPrefix(row.Config, "gowq") {
			goal = "met"
			if rt.Median-qs.Median > 2 || (qs.P99 > 0 && rt.P99/qs.P99 > 2) {
				goal = "NOT met"
			}
		}
		lines = append(lines, driver.Line{Cells: []string{row.Config,
			fmt.Sprintf("%.1f", qs.Median), fmt.Sprintf("%.1f", qs.P99),
			fmt.Sprintf("%.1f", wk.Median), fmt.Sprintf("%.1f", wk.P99),
			fmt.Sprintf("%.1f", rt.Median), fmt.Sprintf("%.1f", rt.P99),
			fmt.Sprintf("%+.1f", rt.Median-qs.Median), ratio, goal,
			fmt.Sprintf("%.1f", row.SchedLatP50), fmt.Sprintf("%.1f", row.SchedLatP99)}})
	}
	driver.WriteBox(&b, heads, lines)
	_, err := io.WriteString(w, b.String())
	return err
}
