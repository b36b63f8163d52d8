package scenario

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/antagonist"
	"github.com/gowq/wq/lab/plot"
)

func TestMain(m *testing.M) {
	antagonist.MaybeRunChild()
	os.Exit(m.Run())
}

// fixedSubmit is a submit table with fixed numbers, in the shape Run
// produces.
func fixedSubmit() *ScenarioResult {
	def := defOf(Submit)
	s := &ScenarioResult{Name: Submit, Title: def.title, Seeds: def.seeds, Default: def.dflt,
		Load:       LoadInfo{Antagonist: "8 burners at 90% (qsort)", ProcCPUs: 1.91, AllPct: 99.5, PerCPU: []CPUBusy{{0, 99.2}, {1, 99.8}}},
		Rounds:     8,
		SliceNs:    int64(300 * time.Millisecond),
		DurationNs: int64(24 * time.Second),
		Notes:      def.notes,
	}
	mk := func(id string, n int64, med, min, max, p95, p98, p99 float64) Row {
		var d rowDef
		for _, r := range def.rows {
			if r.ID == id {
				d = r
			}
		}
		// A niced, partly privileged run: the classes read back.
		ranAt := "nice 19"
		if d.Class == ClassRT {
			ranAt = "FIFO 1"
		}
		return Row{ID: id, Label: d.Label, Note: d.Note, Kind: d.Kind, Class: d.Class, Flags: d.Flags.String(), Items: n, RanAt: ranAt,
			QueueToStart: Latency{Count: n, MedianUs: med, MinUs: min, MaxUs: max, P95Us: p95, P98Us: p98, P99Us: p99, AvgUs: med * 1.5}}
	}
	s.Rows = []Row{
		mk("normal-unbound", 2400, 30, 2, 1038, 2384, 2922, 3100),
		mk("rt-percpu", 2400, 21, 3, 941, 49, 63, 80),
		mk("rt-unbound", 2400, 11, 2, 108, 28, 51, 60),
		{ID: "highpri-percpu", Label: "highpri per-CPU", Kind: KindGowq, Class: ClassHighPri, Skipped: true,
			SkipReason: permissionReason(ClassHighPri)},
		mk("go", 2400, 15.5, 0.71, 1898, 35.36, 70.5, 366.7),
	}
	computeChanges(s, def.changes)
	s.Verdict = computeVerdict(s, def.verdict)
	return s
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := fixedSubmit().WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `== submit: GPU-style submit: a 1 kHz submitter queues small work items (seed 002) ==
load: 8 burners at 90% (qsort) (kept 1.91 CPUs busy); CPUs busy: cpu0 99% cpu1 100% (all 100%); 8 rounds of 300ms slices
+-----------------------------------+---------+------+--------+------+-------+-------+-------+-------+--------+---------+---------+
| config                            |  ran at |    n | median |  min |   max |   p95 |   p98 |   p99 | missed | p98 chg | max chg |
+-----------------------------------+---------+------+--------+------+-------+-------+-------+-------+--------+---------+---------+
| normal unbound (default)          | nice 19 | 2400 |  30.00 | 2.00 |  1038 |  2384 |  2922 |  3100 |      0 |      0% |      0% |
| RT per-CPU (WQ_RT*)               |  FIFO 1 | 2400 |  21.00 | 3.00 | 941.0 | 49.00 | 63.00 | 80.00 |      0 |    -98% |     -9% |
| RT unbound strict (WQ_RT +strict) |  FIFO 1 | 2400 |  11.00 | 2.00 | 108.0 | 28.00 | 51.00 | 60.00 |      0 |    -98% |    -90% |
| highpri per-CPU                   | skipped: nice -20 not permitted (needs CAP_SYS_NICE or RLIMIT_NICE >= 40)                   |
| go statement                      | nice 19 | 2400 |  15.50 | 0.71 |  1898 | 35.36 | 70.50 | 366.7 |      0 |    -98% |    +83% |
+-----------------------------------+---------+------+--------+------+-------+-------+-------+-------+--------+---------+---------+
latencies in us; ran at: the scheduling class read back from the threads that ran the row's items; chg: change against "normal unbound (default)"
missed: 1 ms ticks not submitted (all 16 slots busy, or the submitter itself woke more than 1 ms late).
* gowq has no attribute API to turn affinity_strict off on an RT unbound queue (RT|Unbound is always cpu-scope strict), so the non-strict "WQ_RT" row of seed 002 is measured as RT|PerCPU.
reference: normal unbound (default), the default queue (no class flag), seed 002's "before" and what a Go program gets from wq.Alloc with no flags. The verdict compares the best RT row with the best Go pool or normal-class row of this run, whichever it is.
verdict (p98 queue->start (us)): YES: RT unbound strict 51.00 beats every Go pool and normal-class row; the best of them, go statement 70.50, by 1.4x.
`
	if got := b.String(); got != want {
		t.Errorf("table mismatch\n--- got:\n%s\n--- want:\n%s", got, want)
	}
}

func TestVerdict(t *testing.T) {
	s := fixedSubmit()
	if !s.Verdict.Decided || !s.Verdict.RTWins || s.Verdict.BestRT != "rt-unbound" || s.Verdict.Loser != "go" {
		t.Errorf("verdict = %+v, want decided RT win of rt-unbound over go", s.Verdict)
	}

	// A baseline that is better than every RT row: NO, naming it.
	s.Row("go").QueueToStart.P98Us = 40
	v := computeVerdict(s, mP98)
	if !v.Decided || v.RTWins || v.Loser != "go" || !strings.Contains(v.Text, "NO: RT unbound strict 51.00 loses to go statement 40.00 (1.3x better)") {
		t.Errorf("losing verdict = %+v", v)
	}

	// Equal is not a win, and a loss that close is flagged as noise.
	s.Row("go").QueueToStart.P98Us = 51
	if v := computeVerdict(s, mP98); v.RTWins || !strings.Contains(v.Text, "under 5%") {
		t.Errorf("tie verdict = %+v", v)
	}

	// Close margins are flagged.
	s.Row("go").QueueToStart.P98Us = 52
	if v := computeVerdict(s, mP98); !v.RTWins || !strings.Contains(v.Text, "under 5%") {
		t.Errorf("close verdict = %+v", v)
	}

	// No RT row measured: not decided, with the reason.
	for i := range s.Rows {
		if s.Rows[i].Class == ClassRT {
			s.Rows[i].Skipped, s.Rows[i].SkipReason = true, permissionReason(ClassRT)
		}
	}
	v = computeVerdict(s, mP98)
	if v.Decided || !strings.Contains(v.Text, "SCHED_FIFO not permitted") {
		t.Errorf("verdict without RT = %+v", v)
	}

	// Higher-is-better metric (bandwidth).
	b := &ScenarioResult{Rows: []Row{
		{ID: "rt-percpu", Label: "RT", Kind: KindGowq, Class: ClassRT, Items: 1, BandwidthMiBs: 180},
		{ID: "go", Label: "go", Kind: KindBaseline, Class: ClassGo, Items: 1, BandwidthMiBs: 122},
	}}
	if v := computeVerdict(b, mBW); !v.RTWins || !strings.Contains(v.Text, "1.5x") {
		t.Errorf("bandwidth verdict = %+v", v)
	}
}

func TestChangesAgainstFallbackReference(t *testing.T) {
	s := fixedSubmit()
	s.Default = "normal-percpu" // not in the table
	for i := range s.Rows {
		s.Rows[i].Change = nil
	}
	computeChanges(s, []metric{mMedian})
	if s.Default != "normal-unbound" {
		t.Fatalf("reference = %q, want the first measured row", s.Default)
	}
	if got := s.Row("rt-unbound").Change["median"]; got < -63.4 || got > -63.3 {
		t.Errorf("median change = %v, want -63.33", got)
	}
	if !strings.Contains(strings.Join(s.Notes, "\n"), "was not measured") {
		t.Error("no note about the changed reference")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	r := &Results{
		Schema:   SchemaVersion,
		Started:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Finished: time.Date(2026, 1, 2, 3, 6, 5, 0, time.UTC),
		Machine:  DetectMachine(),
		Settings: Settings{Scenarios: Names(), DurationNs: int64(DefaultDuration), Antagonist: AntagonistCPUIO, Interleaved: true},
	}
	s := fixedSubmit()
	s.Row("rt-unbound").CDF = []CDFPoint{{2, 0}, {11, 0.5}, {108, 1}}
	pct := 12.5
	s.Row("go").OnQueueCPUPct = &pct
	r.Scenarios = append(r.Scenarios, *s)
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"schema": "gowq.wqlab/v1"`, `"queue_to_start"`, `"p98_us"`, `"change_pct"`, `"privileges"`, `"verdict"`} {
		if !strings.Contains(b.String(), key) {
			t.Errorf("JSON lacks %s", key)
		}
	}
	got, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, r)
	}

	_, err = ReadJSON(strings.NewReader(`{"schema":"something/v9"}`))
	if !errors.Is(err, ErrSchema) {
		t.Errorf("wrong schema: err = %v, want ErrSchema", err)
	}
	if _, err := ReadJSON(strings.NewReader(`{`)); err == nil {
		t.Error("truncated JSON: no error")
	}
}

func TestValidate(t *testing.T) {
	bad := []struct {
		o    Options
		want string
	}{
		{Options{Scenarios: []string{"verity,bogus"}}, `unknown scenario "bogus"`},
		{Options{Configs: []string{"rt-percpu,nope"}}, `unknown config "nope"`},
		{Options{Duration: -time.Second}, "negative duration"},
		{Options{Duration: time.Millisecond}, "too short"},
		{Options{Antagonist: "stress"}, `unknown antagonist "stress"`},
		{Options{VeritySize: 1000}, "multiple of 4096"},
		{Options{ErofsBytes: -1}, "negative erofs"},
		{Options{Scenarios: []string{"submit"}, Configs: []string{"kthread"}}, "none of the configs"},
	}
	for _, tc := range bad {
		err := tc.o.Validate()
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidOption with %q", tc.o, err, tc.want)
		}
	}
	if _, err := Run(context.Background(), Options{Scenarios: []string{"x"}}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("Run with a bad scenario: %v", err)
	}

	p, err := Options{Quick: true, Scenarios: []string{" Delayed", "submit,verity"}, Configs: []string{"rt", "go"}}.plan()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{Verity, Submit, Delayed}; !reflect.DeepEqual(p.scenarios, want) {
		t.Errorf("scenarios = %v, want run order %v", p.scenarios, want)
	}
	if p.duration != QuickDuration || p.veritySize != QuickVeritySize || p.erofsBytes != QuickErofsBytes {
		t.Errorf("quick defaults = %v %d %d", p.duration, p.veritySize, p.erofsBytes)
	}
	for id, want := range map[string]bool{"rt-percpu": true, "rt-unbound": true, "kthread-fifo": true, "go": true, "chan": false, "normal-percpu": false} {
		if p.filter.has(id) != want {
			t.Errorf("filter.has(%s) = %v, want %v", id, !want, want)
		}
	}
	p, err = Options{}.plan()
	if err != nil || p.duration != DefaultDuration || !reflect.DeepEqual(p.scenarios, []string{Verity, Erofs, Submit, Delayed, Throughput}) || p.filter != nil || p.antagonist != AntagonistCPUIO {
		t.Errorf("zero Options: %+v, %v", p, err)
	}
}

func TestSliceLen(t *testing.T) {
	for _, tc := range []struct {
		d time.Duration
		n int
	}{{24 * time.Second, 10}, {2500 * time.Millisecond, 12}, {time.Second, 10}, {100 * time.Millisecond, 1}, {time.Hour, 3}, {time.Second, 0}} {
		s, r := sliceLen(tc.d, tc.n)
		if s < 50*time.Millisecond || s > 500*time.Millisecond || r < 1 {
			t.Errorf("sliceLen(%v, %d) = %v x %d", tc.d, tc.n, s, r)
		}
		if n := max(tc.n, 1); r > 1 && s*time.Duration(r*n) > tc.d {
			t.Errorf("sliceLen(%v, %d) = %v x %d overruns the duration", tc.d, tc.n, s, r)
		}
	}
}

func TestCatalog(t *testing.T) {
	cat := Catalog()
	if len(cat) != len(Names()) {
		t.Fatalf("catalog has %d scenarios", len(cat))
	}
	for _, in := range cat {
		d := defOf(in.Name)
		classes := map[Class]bool{}
		kinds := map[string]bool{}
		for _, r := range d.rows {
			classes[r.Class] = true
			if r.Kind == KindBaseline {
				kinds[r.ID] = true
			}
		}
		// Every gowq class and every Go baseline appears in every table.
		for _, c := range []Class{ClassNormal, ClassHighPri, ClassRT} {
			if !classes[c] {
				t.Errorf("%s lacks class %s", in.Name, c)
			}
		}
		for _, b := range []string{"go", "chan", "ants", "pond"} {
			if !kinds[b] {
				t.Errorf("%s lacks baseline %s", in.Name, b)
			}
		}
		if _, ok := configByID(in.Default); !ok || !strings.Contains(strings.Join(in.Configs, " "), in.Default) {
			t.Errorf("%s: default %q is not one of its rows", in.Name, in.Default)
		}
		if len(d.columns) == 0 {
			t.Errorf("%s has no columns", in.Name)
		}
	}
}

func TestDetectPrivileges(t *testing.T) {
	p := DetectPrivileges()
	if p.SchedFIFO != (labsys.CheckRT(1) == nil) || p.Nice20 != (labsys.CheckNice(-20) == nil) {
		t.Errorf("privileges %+v disagree with internal/sched", p)
	}
	if !p.SchedFIFO && !strings.Contains(p.SchedFIFONote, "CAP_SYS_NICE") {
		t.Errorf("no remedy in %q", p.SchedFIFONote)
	}
	if p.EUID == 0 && !p.CapSysNice {
		t.Log("root without CAP_SYS_NICE (a restricted container)")
	}
	m := DetectMachine()
	if m.CPUs < 1 || m.Kernel == "" || m.GoVersion == "" || len(m.OnlineCPUs) == 0 {
		t.Errorf("machine facts incomplete: %+v", m)
	}
}

func TestWritePlot(t *testing.T) {
	s := fixedSubmit()
	path := filepath.Join(t.TempDir(), "submit.svg")
	if err := s.WritePlot(path); !errors.Is(err, plot.ErrNoData) {
		t.Fatalf("plot without CDFs: %v, want ErrNoData", err)
	}
	s.Row("rt-unbound").CDF = []CDFPoint{{2, 0}, {11, 0.5}, {108, 1}}
	s.Row("go").CDF = []CDFPoint{{0.71, 0}, {15.5, 0.5}, {1898, 1}}
	if err := s.WritePlot(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.Contains(b, []byte("go statement")) || !bytes.Contains(b, []byte("RT unbound strict")) {
		t.Error("plot lacks the legend entries")
	}
}

// TestRunShort runs the submit scenario for real, briefly and without
// load: every selected row must come back measured (or skipped with a
// reason when the privilege is missing).
func TestRunShort(t *testing.T) {
	var prog []Progress
	res, err := Run(context.Background(), Options{
		Scenarios:  []string{Submit},
		Configs:    []string{"normal-percpu,rt-unbound,go"},
		Duration:   300 * time.Millisecond,
		Antagonist: AntagonistNone,
		Progress:   func(p Progress) { prog = append(prog, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Scenario(Submit)
	if s == nil || len(s.Rows) != 3 {
		t.Fatalf("submit result: %+v", s)
	}
	for _, r := range s.Rows {
		switch {
		case r.Skipped && r.Class == ClassRT && !res.Machine.Privileges.SchedFIFO:
			if !strings.Contains(r.SkipReason, "SCHED_FIFO") {
				t.Errorf("%s skipped without the reason: %q", r.ID, r.SkipReason)
			}
		case r.Skipped:
			t.Errorf("%s skipped: %s", r.ID, r.SkipReason)
		case r.Items == 0 || r.QueueToStart.Count != r.Items || len(r.CDF) == 0:
			t.Errorf("%s: %d items, %d samples, %d CDF points", r.ID, r.Items, r.QueueToStart.Count, len(r.CDF))
		}
	}
	if s.Load.Antagonist != "none" {
		t.Errorf("antagonist = %q", s.Load.Antagonist)
	}
	if len(prog) < 3 || prog[len(prog)-1].Phase != PhaseDone || prog[len(prog)-1].Result == nil {
		t.Errorf("progress events: %+v", prog)
	}
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil || !strings.Contains(b.String(), "verdict (") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
}
