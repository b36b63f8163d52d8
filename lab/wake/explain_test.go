package wake

import (
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
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
	labsys.SleepThread(2 * time.Millisecond)
	b := r.read()
	if !a.ok || !b.ok || a.tid != b.tid || a.tid != unix.Gettid() {
		t.Fatalf("readings %+v %+v on tid %d", a, b, unix.Gettid())
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

// stagesAt builds a library record whose points lie at the given us
// after t0 (0: not recorded), with off as the clock offset.
func stagesAt(off, t0 int64, us ...int64) *labsys.Stages {
	v := make([]int64, 6)
	for i, u := range us {
		if u != 0 {
			v[i] = off + t0 + u*1000
		}
	}
	return &labsys.Stages{QueueNs: v[0], LockedNs: v[1], WakeNs: v[2], WokenNs: v[3], HavePNs: v[4], StartNs: v[5]}
}

// TestSetStages: the largest gap between recorded points names the stage;
// unrecorded points fold into the next one; points out of order leave the
// stages unknown.
func TestSetStages(t *testing.T) {
	const off, t0 = 5_000_000, 1_000_000
	cases := []struct {
		name    string
		s       *labsys.Stages
		startUs int64
		stage   string
		gapUs   int64
	}{
		{"wake-up", stagesAt(off, t0, 1, 2, 3, 400, 401, 402), 403, "wake->woken", 397},
		{"P wait", stagesAt(off, t0, 1, 2, 3, 4, 900, 901), 902, "woken->haveP", 896},
		{"queuer before the lock", stagesAt(off, t0, 1, 300, 301, 302, 303, 304), 305, "queue->locked", 299},
		{"awake worker: no wake stages", stagesAt(off, t0, 1, 2, 0, 0, 0, 500), 501, "locked->start", 498},
		{"after start", stagesAt(off, t0, 1, 2, 3, 4, 5, 6), 700, "start->fn", 694},
	}
	for _, tc := range cases {
		var e Evidence
		e.setStages(tc.s, off, t0, t0+tc.startUs*1000)
		if e.Stage != tc.stage || e.StageNs != tc.gapUs*1000 || len(e.StagesNs) != len(StagePoints) {
			t.Errorf("%s: stage %q %d ns %v; want %q %d us", tc.name, e.Stage, e.StageNs, e.StagesNs, tc.stage, tc.gapUs)
		}
	}
	var e Evidence
	e.setStages(stagesAt(off, t0, 1, 2, 300, 4, 5, 6), off, t0, t0+7000)
	if e.Stage != "" || e.StagesNs != nil {
		t.Errorf("points out of order: %q %v, want none", e.Stage, e.StagesNs)
	}
}

// TestAttributeStages: where the library's largest gap covers half the
// latency, it decides the cause (after GC STW); elsewhere the evidence
// outside the library does.
func TestAttributeStages(t *testing.T) {
	const off, t0 = 0, 1_000_000
	at := func(latUs int64, s *labsys.Stages, f func(*Evidence)) Evidence {
		e := ev(latUs)
		e.setStages(s, off, t0, t0+latUs*1000)
		if f != nil {
			f(&e)
		}
		return e
	}
	wakeup := stagesAt(off, t0, 1, 2, 3, 400, 401, 402)
	cases := []struct {
		name string
		e    Evidence
		want Cause
	}{
		{"queue->locked: queuer", at(500, stagesAt(off, t0, 1, 300, 301, 302, 303, 304), nil), CauseQueuer},
		{"queue->locked with lock waits: lock", at(500, stagesAt(off, t0, 1, 300, 301, 302, 303, 304), func(e *Evidence) { e.LockWaits = 2 }), CauseLock},
		{"queue->locked with lock waits, queuer runnable: queuer", at(500, stagesAt(off, t0, 1, 300, 301, 302, 303, 304), func(e *Evidence) { e.LockWaits, e.QueuerDelay = 2, 290_000 }), CauseQueuer},
		{"locked->wake with lock waits: queuer (it holds the lock)", at(500, stagesAt(off, t0, 1, 2, 300, 302, 303, 304), func(e *Evidence) { e.LockWaits = 2 }), CauseQueuer},
		{"wake->woken, queuer runnable, worker not: queuer", at(500, wakeup, func(e *Evidence) { e.WorkerDelay, e.QueuerDelay = 0, 390_000 }), CauseQueuer},
		{"wake->woken, worker unknown: kernel", at(500, wakeup, func(e *Evidence) { e.QueuerDelay = 390_000 }), CauseUnknown},
		{"wake->woken: kernel wake-up", at(500, wakeup, nil), CauseUnknown},
		{"wake->woken, worker runnable: scheduler", at(500, wakeup, func(e *Evidence) { e.WorkerDelay = 300_000 }), CauseSched},
		{"woken->haveP: P wait", at(500, stagesAt(off, t0, 1, 2, 3, 4, 400, 401), nil), CausePWait},
		{"GC before stages", at(500, stagesAt(off, t0, 1, 2, 3, 4, 400, 401), func(e *Evidence) { e.GCOverlapNs = 300_000 }), CauseGC},
		{"stages before queue call", at(500, stagesAt(off, t0, 1, 2, 3, 4, 400, 401), func(e *Evidence) { e.QueueCallNs = 450_000 }), CausePWait},
		{"gap under half: old rules", at(500, stagesAt(off, t0, 1, 2, 3, 200, 201, 202), func(e *Evidence) { e.ExtraSleeps = 1 }), CausePWait},
		{"haveP->start: old rules", at(500, stagesAt(off, t0, 1, 2, 3, 4, 5, 450), func(e *Evidence) { e.WorkerDelay = 440_000 }), CauseSched},
	}
	for _, tc := range cases {
		if got := Attribute(tc.e); got != tc.want {
			t.Errorf("%s: stage %q: %q, want %q", tc.name, tc.e.Stage, got, tc.want)
		}
	}
}

// TestExplainerStagesOutput: an outlier with stages prints its stage,
// and the run prints the per-stage summary.
func TestExplainerStagesOutput(t *testing.T) {
	x := newExplainer(0)
	r := &row{c: config{name: "gowq RT per-CPU", kind: KindGowq}}
	t0 := int64(1_000_000_000)
	for i := range 3 {
		t0 += int64(i) * 10_000_000
		if !x.sample(r, t0, t0+1000, t0+600_000, threadStat{}, threadStat{}, threadStat{}, threadStat{}, -1, 0) {
			t.Fatal("600 us not a candidate outlier")
		}
		x.attachStages(r, stagesAt(x.stageOff, t0, 1, 2, 3, 4, 590, 591), t0, t0+600_000)
	}
	res := &Result{Rows: []Row{{Config: "gowq RT per-CPU", Kind: KindGowq}}}
	ex := x.finish(res, 0, "", nil)
	g := ex.Rows[0]
	if g.Outliers != 3 || g.Causes[CausePWait] != 3 || g.Stages["woken->haveP"] != 3 {
		t.Fatalf("row: %d outliers, causes %v, stages %v", g.Outliers, g.Causes, g.Stages)
	}
	var b strings.Builder
	ex.write(&b)
	out := b.String()
	for _, want := range []string{"woken->haveP 586.0", "stage where the time went, all rows (outliers with the library's stages): woken->haveP 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestStageRecorderInRun: an explain run of a gowq row gets the library's
// stages for its samples (the recorder is set for the run and removed
// after).
func TestStageRecorderInRun(t *testing.T) {
	x := newExplainer(time.Nanosecond) // every sample is a candidate
	labsys.SetStageRecorder(x.recordStages)
	defer labsys.SetStageRecorder(nil)
	q, err := wq.Alloc("stages-run", wq.PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	qr, err := startQueuer(wq.OnlineCPUs()[0], QueuerOther)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.stop()
	qr.ex = x
	r := &row{c: config{name: "gowq normal per-CPU", kind: KindGowq}, res: &Row{}, samples: stats.NewSamples(0), q: q}
	if err := qr.measure(r, 20, 100*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	re := x.rows[r]
	with := 0
	for _, o := range re.counted {
		if o.StagesNs != nil {
			with++
			if o.StagesNs[ptQueue] < 0 || o.StagesNs[ptStart] < 0 || o.Stage == "" {
				t.Errorf("sample's stages %v (%q): want queue and start", o.StagesNs, o.Stage)
			}
		}
	}
	if len(re.counted) != 20 || with == 0 {
		t.Fatalf("%d samples, %d with the library's stages", len(re.counted), with)
	}
}
