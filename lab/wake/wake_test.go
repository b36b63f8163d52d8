package wake

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/antagonist"
	"github.com/gowq/wq/lab/probe"
	"github.com/gowq/wq/lab/stats"
)

func TestMain(m *testing.M) {
	antagonist.MaybeRunChild()
	os.Exit(m.Run())
}

// checkRows checks that every measured row has n samples with sane
// numbers: positive, ordered, and under a second.
func checkRows(t *testing.T, res *Result, n int64) {
	t.Helper()
	for _, r := range res.Rows {
		if r.Skipped != "" {
			continue
		}
		s := r.Summary
		if s.Count != n || s.Min <= 0 || s.Median < s.Min || s.P99 < s.Median || s.Max < s.P99 || s.Max > 1e6 {
			t.Errorf("%s: summary %+v", r.Config, s)
		}
	}
}

func TestRunIdle(t *testing.T) {
	res, err := Run(context.Background(), Options{Load: LoadNone, Samples: 50, Slice: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(configs) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(configs))
	}
	// Without cgo the raw-probe rows are skipped with the reason, and the
	// targets, which are ratios to the probe, are not checked.
	noProbe := probe.Available() != nil
	kinds := map[string]int{}
	for _, r := range res.Rows {
		kinds[r.Kind]++
		if noProbe && r.Kind == KindProbe {
			if r.Skipped != probe.ErrUnavailable.Error() {
				t.Errorf("%s without cgo: skipped %q, want the probe's reason", r.Config, r.Skipped)
			}
			continue
		}
		if r.Skipped != "" {
			if os.Geteuid() == 0 {
				t.Errorf("%s skipped as root: %s", r.Config, r.Skipped)
			}
			if r.Kind == KindGo {
				t.Errorf("Go executor %s skipped: %s", r.Config, r.Skipped)
			}
		}
	}
	if kinds[KindProbe] != 2 || kinds[KindGowq] != 5 || kinds[KindGo] != 4 {
		t.Errorf("rows by kind %v, want 2 probe, 5 gowq, 4 go", kinds)
	}
	checkRows(t, res, 50)
	var b bytes.Buffer
	res.WriteTable(&b)
	for _, want := range []string{"raw probe SCHED_FIFO", "gowq RT per-CPU", "gowq normal per-CPU", "latencies in us",
		"go statement", "channel pool", "ants/v2", "pond/v2", " max |", "queuer: SCHED_OTHER"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if os.Geteuid() == 0 && !noProbe && (!strings.Contains(b.String(), "target 1:") || !strings.Contains(b.String(), "worst case:")) {
		t.Errorf("table lacks the target lines:\n%s", b.String())
	}
}

// TestRunFIFOQueuerGoLoad runs the issue-14 configuration: a SCHED_FIFO
// queuer, with every P kept busy by the process's own goroutines.
func TestRunFIFOQueuerGoLoad(t *testing.T) {
	o := Options{Load: LoadNone, Samples: 30, Slice: 10, Queuer: QueuerFIFO, GoLoad: 2,
		Configs: []string{"raw probe SCHED_FIFO", "raw probe SCHED_OTHER", "gowq RT per-CPU", "gowq normal unbound", "channel pool"}}
	res, err := Run(context.Background(), o)
	if rtErr := labsys.CheckRT(1); rtErr != nil {
		if err == nil {
			t.Fatal("FIFO queuer accepted without the privilege")
		}
		t.Skipf("SCHED_FIFO not permitted: %v (Run: %v)", rtErr, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(o.Configs) {
		t.Fatalf("%d rows, want the %d selected", len(res.Rows), len(o.Configs))
	}
	for i, r := range res.Rows {
		if r.Config != o.Configs[i] {
			t.Errorf("row %d is %q, want %q", i, r.Config, o.Configs[i])
		}
		other := r.Config == "raw probe SCHED_OTHER" || (r.Kind == KindProbe && probe.Available() != nil)
		if other != (r.Skipped != "") {
			t.Errorf("%s: skipped %q", r.Config, r.Skipped)
		}
	}
	checkRows(t, res, 30)
	if res.GoLoad != 2 || !strings.HasPrefix(res.QueuerOn, "SCHED_FIFO") {
		t.Errorf("go load %d, queuer %q", res.GoLoad, res.QueuerOn)
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	if probe.Available() == nil && !strings.Contains(b.String(), "goal <= 3x with a SCHED_FIFO queuer") {
		t.Errorf("table lacks the FIFO worst-case goal:\n%s", b.String())
	}
}

func TestRunBadOptions(t *testing.T) {
	for _, o := range []Options{
		{Load: "bogus", Samples: 1},
		{Samples: -1},
		{Samples: MaxSamples + 1},
		{Queuer: "rr"},
		{GoLoad: -1},
		{GoLoad: MaxGoLoad + 1},
		{Gap: -1},
		{GCLoad: -1},
		{GCLoad: MaxGCLoad + 1},
		{Explain: true, ExplainThreshold: -1},
		{Configs: []string{"gowq RT per-CPU", "nope"}},
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: err %v, want ErrInvalidOption", o, err)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

// TestWriteTableFixed checks the table's shape and ratios on fixed
// numbers.
func TestWriteTableFixed(t *testing.T) {
	sum := func(n int64, p50, p99, max float64) stats.Summary {
		return stats.Summary{Count: n, Min: 1, Median: p50, Avg: p50, P99: p99, Max: max}
	}
	res := &Result{Load: LoadHogs, LoadName: "one hog pinned to each of 2 CPUs at nice -20", Queuer: QueuerOther,
		QueuerOn: "SCHED_OTHER, pinned to cpu1", Samples: 10000, Rows: []Row{
			{Config: "raw probe SCHED_FIFO", Kind: KindProbe, Summary: sum(10000, 2, 10, 20)},
			{Config: "raw probe SCHED_OTHER", Kind: KindProbe, Summary: sum(10000, 4, 40, 80)},
			{Config: "gowq RT per-CPU", Kind: KindGowq, Summary: sum(10000, 3, 15, 150)},
			{Config: "gowq RT unbound strict", Kind: KindGowq, Summary: sum(10000, 5, 30, 900)},
			{Config: "gowq normal per-CPU", Kind: KindGowq, Summary: sum(10000, 8, 3000, 9000)},
			{Config: "gowq highpri per-CPU", Kind: KindGowq, Skipped: "nice -20: not permitted"},
			{Config: "ants/v2", Kind: KindGo, Summary: sum(9999, 6, 100, 200)},
		}}
	var b bytes.Buffer
	res.WriteTable(&b)
	out := b.String()
	for _, want := range []string{
		"| config                 |     n | min | p50 | avg |    p99 |    max | p50/probe |",
		"| gowq RT per-CPU        | 10000 | 1.0 | 3.0 | 3.0 |   15.0 |  150.0 |     1.50x |",
		"| ants/v2                |  9999 | 1.0 | 6.0 | 6.0 |  100.0 |  200.0 |     1.50x |",
		"| gowq highpri per-CPU   | skipped: nice -20",
		"target 1: RT p99 15.0 us is 1.50x the raw SCHED_FIFO probe's p99 10.0 us: within 2x",
		"target 2: normal p99 3000.0 us is 200.0x RT's p99 (target >= 10x): met",
		"worst case: best RT max 150.0 us (gowq RT per-CPU, n 10000) is 7.5x the raw SCHED_FIFO probe's max 20.0 us (goal <= 10x with a SCHED_OTHER queuer): met",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
