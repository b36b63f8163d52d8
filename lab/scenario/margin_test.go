package scenario

import (
	"strings"
	"testing"
)

// roundsOf gives the submit table's rt-unbound and go rows these p98
// values per round.
func roundsOf(rt, gost []float64) roundFigures {
	f := roundFigures{}
	for k := range rt {
		f["rt-unbound"] = append(f["rt-unbound"], Row{ID: "rt-unbound", Items: 10, QueueToStart: Latency{P98Us: rt[k]}})
		f["go"] = append(f["go"], Row{ID: "go", Items: 10, QueueToStart: Latency{P98Us: gost[k]}})
	}
	return f
}

// TestMarginRoundsDisagreeNotDecided: a whole-run win that some rounds
// contradict is "not decided" (catches a verdict that flips between runs
// being printed as decided).
func TestMarginRoundsDisagreeNotDecided(t *testing.T) {
	s := fixedSubmit() // whole run: RT unbound 51 beats go 70.5
	applyMargin(s, mP98, roundsOf([]float64{50, 50, 50, 50}, []float64{70, 40, 80, 90}))
	v := s.Verdict
	if v.Decided || !strings.Contains(v.Text, "not decided") || !strings.Contains(v.Text, "rounds disagree (0.80x-1.80x, 4 rounds)") ||
		!strings.Contains(v.Detail, "0.80x-1.80x (4 rounds; the metric per round: RT unbound strict 50.00-50.00, go statement 40.00-90.00)") {
		t.Errorf("verdict = %+v", v)
	}
	if v.RatioMin != 0.8 || v.RatioMax != 1.8 || len(v.RoundRatios) != 4 {
		t.Errorf("spread = %v %v %v", v.RatioMin, v.RatioMax, v.RoundRatios)
	}
}

// TestMarginEveryRoundAgreesDecided: a win in every round stays decided
// and gives its spread.
func TestMarginEveryRoundAgreesDecided(t *testing.T) {
	s := fixedSubmit()
	applyMargin(s, mP98, roundsOf([]float64{50, 50, 50}, []float64{60, 70, 80}))
	v := s.Verdict
	if !v.Decided || !v.RTWins || !strings.Contains(v.Text, "YES") || !strings.Contains(v.Text, "every round agrees") {
		t.Errorf("verdict = %+v", v)
	}
}

// TestMarginTooFewRounds: with fewer than minRounds rounds there is no
// spread, so no decision.
func TestMarginTooFewRounds(t *testing.T) {
	s := fixedSubmit()
	applyMargin(s, mP98, roundsOf([]float64{50, 50}, []float64{60, 70}))
	if s.Verdict.Decided || !strings.Contains(s.Verdict.Text, "too few") {
		t.Errorf("verdict = %+v", s.Verdict)
	}
}

// TestBusyWarning: a table without antagonist is called idle only when
// the measured load says so (catches the "idle machine" label on a busy
// machine).
func TestBusyWarning(t *testing.T) {
	busy := LoadInfo{Antagonist: "none", AllPct: 99, PerCPU: []CPUBusy{{0, 99}}}
	if w := busyWarning(busy); !strings.Contains(w, "NOT idle") {
		t.Errorf("busy: %q", w)
	}
	idle := LoadInfo{Antagonist: "none", AllPct: 3, PerCPU: []CPUBusy{{0, 3}}}
	if w := busyWarning(idle); w != "machine idle" {
		t.Errorf("idle: %q", w)
	}
	if w := busyWarning(LoadInfo{Antagonist: "8 burners", AllPct: 99, PerCPU: []CPUBusy{{0, 99}}}); w != "" {
		t.Errorf("loaded: %q", w)
	}
}

// TestThroughputCaptionHasNoChg: the throughput table has no change
// column, so its caption does not explain one.
func TestThroughputCaptionHasNoChg(t *testing.T) {
	s := &ScenarioResult{Name: Throughput, Default: "ants", Rows: []Row{{ID: "ants", Label: "ants/v2", Items: 1}}}
	tb, err := s.Table()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb.Caption, "chg") {
		t.Errorf("caption %q explains a chg column the table lacks (%v)", tb.Caption, tb.Heads)
	}
}

// TestRecordMergeKeepsActive: merging a round's record into the row's
// keeps its measuring time (catches a bandwidth of 0 MiB/s and a
// measured_ns of 0 once slices go to records of their own).
func TestRecordMergeKeepsActive(t *testing.T) {
	a, b := newRecord(), newRecord()
	b.active, b.bytes = 2e9, 1<<20
	a.merge(b)
	a.merge(b)
	if a.active != 4e9 || a.bytes != 2<<20 {
		t.Errorf("merged active %v, bytes %d", a.active, a.bytes)
	}
}
