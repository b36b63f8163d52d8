package scenario

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// TestThroughputQuick runs the throughput scenario at --quick size on a
// few rows and checks the table's shape and that every figure is sane:
// the counts are the planned ones, rates and CPU are positive, the ants
// row is 1.00x itself, and the channel pool allocates nothing per item.
func TestThroughputQuick(t *testing.T) {
	res, err := Run(context.Background(), Options{Scenarios: []string{Throughput}, Quick: true,
		Configs: []string{"normal-percpu", "rt-unbound", "chan", "ants"}})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Scenario(Throughput)
	if s == nil || s.Skipped || len(s.Rows) != 4 {
		t.Fatalf("scenario %+v", s)
	}
	for _, r := range s.Rows {
		if r.Skipped {
			if r.Class == ClassRT && os.Geteuid() != 0 && strings.Contains(r.SkipReason, "SCHED_FIFO") {
				continue
			}
			t.Errorf("%s skipped: %s", r.ID, r.SkipReason)
			continue
		}
		tp := r.Throughput
		if r.Items != throughputQuickSparse || r.QueueToStart.MedianUs <= 0 || r.QueueToStart.MaxUs < r.QueueToStart.MedianUs {
			t.Errorf("%s: %d sparse items, latency %+v", r.ID, r.Items, r.QueueToStart)
		}
		if tp == nil || tp.Items != throughputQuickItems || tp.ItemsPerSec <= 1000 || tp.CPUSecPerMItems <= 0 ||
			tp.AllocsPerItem < 0 || tp.VsAnts <= 0 {
			t.Errorf("%s: back to back %+v", r.ID, tp)
		}
	}
	if a := s.Row("ants").Throughput; a == nil || a.VsAnts != 1 {
		t.Errorf("ants row %+v, want 1x itself", a)
	}
	if c := s.Row("chan").Throughput; c == nil || c.AllocsPerItem > 0.05 {
		t.Errorf("chan pool allocates: %+v", c)
	}
	// Decided or not depends on the rounds' spread on a loaded machine;
	// either way the verdict names the rows and their ranges.
	if !strings.Contains(s.Verdict.Text, "normal per-CPU") || !strings.Contains(s.Verdict.Text, "rounds ") {
		t.Errorf("verdict %+v", s.Verdict)
	}
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== throughput: ", "| idle p50 | idle p99 | idle max | items/s | x ants | allocs/item | CPU s/M items |",
		"| ants/v2 ", "1.00x", "4 rounds", "through a ring of 64"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestThroughputVerdict(t *testing.T) {
	mk := func(id string, vs, allocs float64) Row {
		c, _ := configByID(id)
		return Row{ID: id, Label: c.Label, Kind: c.Kind, Class: c.Class, Items: 10,
			Throughput: &BackToBack{Items: 100, ItemsPerSec: vs * 1e6, AllocsPerItem: allocs, VsAnts: vs}}
	}
	s := &ScenarioResult{Name: Throughput, Rows: []Row{
		mk("normal-percpu", 1.2, 0), mk("normal-unbound", 1.0, 0), mk("highpri-percpu", 0.1, 0),
		mk("rt-percpu", 0.6, 0), mk("rt-unbound", 0.4, 0), mk("ants", 1, 0.5),
	}}
	v := throughputVerdict(s)
	if !v.Decided || v.RTWins || v.BestRT != "rt-percpu" {
		t.Errorf("verdict %+v", v)
	}
	for _, want := range []string{"normal per-CPU 1.20x (goal 1.0x: met)", "normal unbound 1.00x (goal 1.0x: met)",
		"RT unbound strict 0.40x (goal 0.5x: NOT met)", "(goal 0: met)"} {
		if !strings.Contains(v.Text, want) {
			t.Errorf("verdict lacks %q: %s", want, v.Text)
		}
	}
	if strings.Contains(v.Text, "highpri") {
		t.Errorf("highpri has no goal: %s", v.Text)
	}
	s.Rows[4].Throughput.VsAnts = 0.5
	s.Rows[0].Throughput.AllocsPerItem = 1
	if v := throughputVerdict(s); v.RTWins || !strings.Contains(v.Text, "at most 1.000 (goal 0: NOT met)") {
		t.Errorf("allocating verdict %+v", v)
	}
	s.Rows[0].Throughput.AllocsPerItem = 0
	if v := throughputVerdict(s); !v.RTWins {
		t.Errorf("all goals met, verdict %+v", v)
	}
	s.Rows = s.Rows[:5]
	if v := throughputVerdict(s); v.Decided {
		t.Errorf("decided without ants: %+v", v)
	}
}
