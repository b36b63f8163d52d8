// Package beside measures the obvious program for latency-critical
// post-processing beside CPU-bound background work: an RT queue for the
// post-processing next to a default queue for the background, against the
// same RT queue next to a Threads() queue, and against two ants pools. The
// three setups run alternated in one process, each segment with its own
// queues or pools, so that they share the machine's state.
package beside

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/lab/baseline"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

// The setups, in the order they run within a round.
const (
	SetupDefault = "gowq RT beside a default queue"
	SetupThreads = "gowq RT beside a Threads() queue"
	SetupAnts    = "two ants pools"
)

// Options shape a run; zero values take the defaults.
type Options struct {
	Rounds  int           // rounds of the three setups (default 6)
	Segment time.Duration // one setup's time per round (default 500 ms); the first 50 ms are not measured
	Period  time.Duration // a post-processing item is queued this often (default 1 ms)
	Post    time.Duration // CPU time of one post-processing item (default 20 us)
	BG      int           // background items always in flight (default 4)
	BGItem  time.Duration // CPU time of one background item (default 2 ms)
}

func (o Options) withDefaults() Options {
	if o.Rounds <= 0 {
		o.Rounds = 6
	}
	if o.Segment <= 0 {
		o.Segment = 500 * time.Millisecond
	}
	if o.Period <= 0 {
		o.Period = time.Millisecond
	}
	if o.Post <= 0 {
		o.Post = 20 * time.Microsecond
	}
	if o.BG <= 0 {
		o.BG = 4
	}
	if o.BGItem <= 0 {
		o.BGItem = 2 * time.Millisecond
	}
	return o
}

// Setup is one setup's result over every round.
type Setup struct {
	Name     string        `json:"name"`
	Skipped  string        `json:"skipped,omitempty"`
	Latency  stats.Summary `json:"latency_us"` // queue->start of the post-processing items
	BGItems  int64         `json:"bg_items"`
	BGPerSec float64       `json:"bg_items_per_s"`
	measured time.Duration
	samples  *stats.Samples
}

// Result is a whole run.
type Result struct {
	Options    Options  `json:"options"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Setups     []*Setup `json:"setups"`
	Note       string   `json:"note,omitempty"`
}

// executors of one segment.
type pair struct {
	post, bg func(fn func()) error
	close    func()
}

func open(name string, o Options) (*pair, error) {
	switch name {
	case SetupDefault, SetupThreads:
		post, err := wq.Alloc("beside-post", wq.Unbound|wq.RT, 4)
		if err != nil {
			return nil, err
		}
		var opts []wq.Option
		if name == SetupThreads {
			opts = append(opts, wq.Threads())
		}
		bg, err := wq.Alloc("beside-bg", wq.Unbound, 64, opts...)
		if err != nil {
			post.Destroy()
			return nil, err
		}
		return &pair{post: post.Go, bg: bg.Go, close: func() { bg.Destroy(); post.Destroy() }}, nil
	case SetupAnts:
		post, err := baseline.NewAnts(4)
		if err != nil {
			return nil, err
		}
		bg, err := baseline.NewAnts(64)
		if err != nil {
			post.Close()
			return nil, err
		}
		return &pair{post: post.Submit, bg: bg.Submit, close: func() { bg.Close(); post.Close() }}, nil
	}
	return nil, fmt.Errorf("beside: unknown setup %q", name)
}

// Run runs the setups alternated, Rounds times each. A setup that cannot
// run (an RT queue without the privilege) is skipped with the reason.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	res := &Result{Options: o, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for _, n := range []string{SetupDefault, SetupThreads, SetupAnts} {
		res.Setups = append(res.Setups, &Setup{Name: n, samples: stats.NewSamples(0)})
	}
	for range o.Rounds {
		for _, s := range res.Setups {
			if s.Skipped != "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := segment(s, o); err != nil {
				if errors.Is(err, wq.ErrPermission) {
					s.Skipped = err.Error()
					continue
				}
				return nil, err
			}
		}
	}
	for _, s := range res.Setups {
		if s.Skipped != "" {
			continue
		}
		s.Latency = s.samples.Summary()
		if s.measured > 0 {
			s.BGPerSec = float64(s.BGItems) / s.measured.Seconds()
		}
	}
	return res, nil
}

// segment runs one setup for o.Segment and adds its figures to s.
func segment(s *Setup, o Options) error {
	p, err := open(s.Name, o)
	if err != nil {
		return err
	}
	var quit, measuring atomic.Bool
	var bgDone atomic.Int64
	var wg sync.WaitGroup
	var bgItem func()
	bgItem = func() {
		driver.Spin(o.BGItem)
		if measuring.Load() {
			bgDone.Add(1)
		}
		if quit.Load() || p.bg(bgItem) != nil {
			wg.Done()
		}
	}
	wg.Add(o.BG)
	for range o.BG {
		if p.bg(bgItem) != nil {
			wg.Done()
		}
	}
	var mu sync.Mutex
	var lat []int64
	warm := time.Now().Add(50 * time.Millisecond)
	end := time.Now().Add(o.Segment)
	var postWG sync.WaitGroup
	t := time.NewTicker(o.Period)
	for now := range t.C {
		if now.After(end) {
			break
		}
		if !measuring.Load() && now.After(warm) {
			measuring.Store(true)
			warm = time.Now()
		}
		m := measuring.Load()
		t0 := stats.Now()
		postWG.Add(1)
		if err := p.post(func() {
			d := stats.Now() - t0
			if m {
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
			driver.Spin(o.Post)
			postWG.Done()
		}); err != nil {
			postWG.Done()
		}
	}
	t.Stop()
	elapsed := time.Since(warm)
	n := bgDone.Load()
	quit.Store(true)
	postWG.Wait()
	wg.Wait()
	p.close()
	for _, d := range lat {
		s.samples.Add(d)
	}
	s.BGItems += n
	s.measured += elapsed
	return nil
}

// WriteTable prints the three setups and the goals: RT p99 beside a busy
// default queue at most 2x its p99 beside a Threads() queue and at most 2x
// the p99 of two ants pools; the background's items/s beside the default
// queue at least 0.8x ants'.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "RT post-processing beside CPU-bound background work: every %v a %v item; %d background items of %v always in flight; %d rounds of %v per setup, alternated; GOMAXPROCS %d before any RT queue\n",
		o.Period, o.Post, o.BG, o.BGItem, o.Rounds, o.Segment, r.GOMAXPROCS)
	var lines []driver.Line
	for _, s := range r.Setups {
		if s.Skipped != "" {
			lines = append(lines, driver.Line{Cells: []string{s.Name}, Skipped: true, Skip: driver.ShortReason(s.Skipped)})
			continue
		}
		l := s.Latency
		lines = append(lines, driver.Line{Cells: []string{s.Name, fmt.Sprint(l.Count), fmt.Sprintf("%.1f", l.Median),
			fmt.Sprintf("%.1f", l.P99), fmt.Sprintf("%.1f", l.Max), fmt.Sprintf("%.0f", s.BGPerSec)}})
	}
	driver.WriteBox(&b, []string{"setup", "n", "p50", "p99", "max", "bg items/s"}, lines)
	b.WriteString("queue->start of the post-processing items, us\n")
	get := func(n string) *Setup { // the measured setup named n (driver.Measured), nil if none
		key := func(s **Setup) (string, string, int64) { return (*s).Name, (*s).Skipped, (*s).Latency.Count }
		if s := driver.Measured(r.Setups, n, key); s != nil {
			return *s
		}
		return nil
	}
	def, thr, ants := get(SetupDefault), get(SetupThreads), get(SetupAnts)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	if def != nil && thr != nil {
		x := def.Latency.P99 / thr.Latency.P99
		fmt.Fprintf(&b, "goal 1: RT p99 beside a default queue %.1f us is %.2fx its p99 beside a Threads() queue %.1f us (goal <= 2x): %s\n",
			def.Latency.P99, x, thr.Latency.P99, verdict(x <= 2))
	}
	if def != nil && ants != nil {
		x := def.Latency.P99 / ants.Latency.P99
		fmt.Fprintf(&b, "goal 2: RT p99 beside a default queue %.1f us is %.2fx the p99 of two ants pools %.1f us (goal <= 2x): %s\n",
			def.Latency.P99, x, ants.Latency.P99, verdict(x <= 2))
		if ants.BGPerSec > 0 {
			y := def.BGPerSec / ants.BGPerSec
			fmt.Fprintf(&b, "goal 3: background items/s beside RT %.0f is %.2fx ants' %.0f (goal >= 0.8x): %s\n",
				def.BGPerSec, y, ants.BGPerSec, verdict(y >= 0.8))
		}
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", r.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
