package wake

import (
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/lab/stats"
)

// ev is evidence with every optional figure unknown.
func ev(latUs int64) Evidence {
	return Evidence{LatencyNs: latUs * 1000, QueueCallNs: 1000, QueuerDelay: -1, WorkerDelay: -1, ExtraSleeps: -1, LockWaits: -1}
}

func TestAttribute(t *testing.T) {
	with := func(e Evidence, f func(*Evidence)) Evidence { f(&e); return e }
	cases := []struct {
		name string
		e    Evidence
		want Cause
	}{
		{"nothing known", ev(500), CauseUnknown},
		{"zero latency", Evidence{}, CauseUnknown},
		{"GC covers half", with(ev(500), func(e *Evidence) { e.GCOverlapNs = 250_000 }), CauseGC},
		{"long queue call, returned before start", with(ev(500), func(e *Evidence) { e.QueueCallNs = 400_000 }), CauseQueuer},
		{"long queue call, started inside: queuer run_delay counts", with(ev(500), func(e *Evidence) {
			e.QueueCallNs, e.StartedInCall, e.QueuerDelay = 900_000, true, 300_000
		}), CauseQueuer},
		{"long queue call, started inside, queuer ran", with(ev(500), func(e *Evidence) {
			e.QueueCallNs, e.StartedInCall, e.QueuerDelay = 900_000, true, 0
		}), CauseUnknown},
		{"worker waited for a CPU", with(ev(500), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps, e.LockWaits = 450_000, 0, 0 }), CauseSched},
		{"lock wait", with(ev(500), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps, e.LockWaits = 10_000, 1, 2 }), CauseLock},
		{"P wait: slept again, no lock wait", with(ev(500), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps, e.LockWaits = 10_000, 1, 0 }), CausePWait},
		{"P wait with lock unknown (a Go row)", with(ev(500), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps = 0, 2 }), CausePWait},
		{"quarter rule", with(ev(400), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps, e.LockWaits = 100_000, 0, 0 }), CauseSched},
		{"below a quarter", with(ev(400), func(e *Evidence) { e.WorkerDelay, e.ExtraSleeps, e.LockWaits = 99_000, 0, 0 }), CauseUnknown},
		// Precedence.
		{"GC before queuer", with(ev(500), func(e *Evidence) { e.GCOverlapNs, e.QueueCallNs = 300_000, 490_000 }), CauseGC},
		{"queuer before scheduler", with(ev(500), func(e *Evidence) { e.QueueCallNs, e.WorkerDelay = 300_000, 490_000 }), CauseQueuer},
		{"scheduler before lock wait", with(ev(500), func(e *Evidence) { e.WorkerDelay, e.LockWaits = 300_000, 3 }), CauseSched},
		{"lock wait before P wait", with(ev(500), func(e *Evidence) { e.ExtraSleeps, e.LockWaits = 3, 1 }), CauseLock},
		{"P wait before a quarter share", with(ev(500), func(e *Evidence) { e.GCOverlapNs, e.ExtraSleeps = 200_000, 1 }), CausePWait},
		{"quarter: GC before scheduler", with(ev(500), func(e *Evidence) { e.GCOverlapNs, e.WorkerDelay = 130_000, 240_000 }), CauseGC},
	}
	for _, tc := range cases {
		if got := Attribute(tc.e); got != tc.want {
			t.Errorf("%s: %+v: %q, want %q", tc.name, tc.e, got, tc.want)
		}
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"123 456 7\n", 456, true},
		{"0 0 0\n", 0, true},
		{"99 18446744 3", 18446744, true},
		{"", 0, false},
		{"12\n", 0, false},
		{"12 x 3\n", 0, false},
		{"12 34x 3\n", 0, false},
	} {
		v, ok := parseSchedstat([]byte(tc.in))
		if v != tc.want || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.in, v, ok, tc.want, tc.ok)
		}
	}
}

// TestStatReader reads the figures of a locked thread around a sleep:
// the same tid, and one more voluntary context switch at least.
func TestStatReader(t *testing.T) {
	r := newStatReader()
	defer r.close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := r.read()
	sched.Nanosleep(2_000_000)
	b := r.read()
	if !a.ok || !b.ok || a.tid != b.tid || a.tid != sched.Gettid() {
		t.Fatalf("readings %+v %+v on tid %d", a, b, sched.Gettid())
	}
	if b.nvcsw <= a.nvcsw || b.runDelay < a.runDelay {
		t.Errorf("after a 2 ms sleep: nvcsw %d -> %d, run_delay %d -> %d", a.nvcsw, b.nvcsw, a.runDelay, b.runDelay)
	}
}

// TestExplainerFinish feeds an explainer synthetic samples: the threshold
// is 10x the probe's max when that is above the floor, a GC pause is
// overlapped, lines are capped per row, and the summary is printed.
func TestExplainerFinish(t *testing.T) {
	x := newExplainer(0)
	r := &row{c: config{name: "gowq RT per-CPU", kind: KindGowq}}
	tid := func(id int, delay, nvcsw int64) threadStat {
		return threadStat{tid: id, runDelay: delay, nvcsw: nvcsw, ok: true}
	}
	// 30 samples of 300 us with a worker run-queue wait of 280 us,
	// one of 500 us inside a GC pause, one of 150 us (below 10x the
	// probe's 20 us), one of 50 us (below the floor).
	base := int64(1_000_000_000)
	for i := range 30 {
		t0 := base + int64(i)*10_000_000
		x.sample(r, t0, t0+1000, t0+300_000, tid(1, 0, 0), tid(1, 0, 0), tid(2, 0, 5), tid(2, 280_000, 6), 0, 1)
		x.lockReading(r, 0)
	}
	t0 := base + 500_000_000
	// key 0: no real cycle has it (readPauses keeps the cycles after the start)
	x.pauses[0] = [2]int64{t0 + 100_000, t0 + 450_000}
	x.sample(r, t0, t0+1000, t0+500_000, threadStat{}, threadStat{}, threadStat{}, threadStat{}, 10, 1)
	x.lockReading(r, 10)
	x.sample(r, t0, t0+1000, t0+150_000, threadStat{}, threadStat{}, threadStat{}, threadStat{}, -1, 0)
	x.sample(r, t0, t0+1000, t0+50_000, threadStat{}, threadStat{}, threadStat{}, threadStat{}, -1, 0)
	res := &Result{Rows: []Row{{Config: "raw probe SCHED_FIFO", Kind: KindProbe}, {Config: "gowq RT per-CPU", Kind: KindGowq}}}
	ex := x.finish(res, 20, "SCHED_FIFO", map[string][]int64{"raw probe SCHED_FIFO": {120_000, 250_000}})
	if ex.ThresholdUs != 200 || !strings.Contains(ex.ThresholdBy, "10x the SCHED_FIFO probe's max 20.0 us") {
		t.Errorf("threshold %.1f (%s), want 200 from the probe", ex.ThresholdUs, ex.ThresholdBy)
	}
	if len(ex.Rows) != 2 {
		t.Fatalf("%d rows", len(ex.Rows))
	}
	p, g := ex.Rows[0], ex.Rows[1]
	if p.Outliers != 1 || p.Causes[CauseNotTaped] != 1 {
		t.Errorf("probe row %+v", p)
	}
	if g.Outliers != 31 || g.Causes[CauseSched] != 30 || g.Causes[CauseGC] != 1 || len(g.Lines) != ExplainLinesPerRow {
		t.Errorf("gowq row: %d outliers, causes %v, %d lines", g.Outliers, g.Causes, len(g.Lines))
	}
	var gc *Outlier
	for i := range g.counted {
		if g.counted[i].LatencyNs == 500_000 {
			gc = &g.counted[i]
		}
	}
	if gc == nil || gc.GCOverlapNs != 350_000 || gc.LockWaits != 0 {
		t.Errorf("GC outlier %+v", gc)
	}
	if l := g.Lines[0]; l.WorkerDelay != 280_000 || l.ExtraSleeps != 0 || l.QueuerDelay != 0 || l.LockWaits != 0 {
		t.Errorf("first line %+v", l)
	}
	var b strings.Builder
	ex.write(&b)
	out := b.String()
	for _, want := range []string{"explain: outliers above 200.0 us", "outlier causes per row:", "| gowq RT per-CPU      |       31 |      1 |",
		"+11 more", "causes, all rows: 32 outliers: GC STW 1, scheduler 30, not instrumented 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestHistDelta(t *testing.T) {
	a := &metrics.Float64Histogram{Counts: []uint64{5, 0, 0, 0}, Buckets: []float64{0, 1e-6, 1e-5, 1e-4, 1e-3}}
	b := &metrics.Float64Histogram{Counts: []uint64{5, 98, 1, 1}, Buckets: a.Buckets}
	p99, mx, n := histDelta(a, b)
	if n != 100 || p99 != 100 || mx != 1000 {
		t.Errorf("p99 %.1f max %.1f n %d; want 100, 1000, 100", p99, mx, n)
	}
	if _, _, n := histDelta(a, a); n != 0 {
		t.Errorf("no change: n %d", n)
	}
}

// TestTraceSTW traces a forced GC: its stop-the-world ranges come back,
// mapped onto stats.Now() between the stamps taken around it.
func TestTraceSTW(t *testing.T) {
	x := newExplainer(0)
	x.startTrace()
	if x.tfile == nil {
		t.Skipf("runtime tracer busy: %s", x.tnote)
	}
	a := stats.Now()
	runtime.GC()
	b := stats.Now()
	x.stopTrace()
	if x.stw == nil {
		t.Fatalf("no ranges: %s", x.tnote)
	}
	in := 0
	for _, r := range x.stw {
		if r[1] < r[0] {
			t.Errorf("range %v ends before it begins", r)
		}
		if r[0] >= a-100_000 && r[1] <= b+100_000 {
			in++
		}
	}
	// A GC cycle has two pauses: sweep termination and mark termination.
	if in < 2 {
		t.Errorf("%d of %d stop-the-world ranges inside the forced GC [%d, %d]: %v", in, len(x.stw), a, b, x.stw)
	}
	if x.gcOverlap(a-100_000, b+100_000) <= 0 {
		t.Errorf("no overlap with the forced GC")
	}
}
