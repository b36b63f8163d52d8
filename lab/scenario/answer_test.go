package scenario

import (
	"fmt"
	"strings"
	"testing"
)

// answerResults is two tables with known figures: in submit (p98) RT
// unbound strict is the best workqueue row and the go statement beats every
// workqueue row; in delayed (p99) RT per-CPU is the best, and no outside pool
// beats it (a batched row, the same queue queued another way, does not
// count).
func answerResults() *Results {
	mk := func(id string, v float64) Row {
		c, _ := configByID(id)
		return Row{ID: id, Label: c.Label, Kind: c.Kind, Class: c.Class, Batch: c.Batch, Items: 100,
			QueueToStart: Latency{Count: 100, P98Us: v, P99Us: v}}
	}
	skipped := mk("highpri-percpu", 1)
	skipped.Skipped, skipped.Items = true, 0
	return &Results{Scenarios: []ScenarioResult{
		{Name: Submit, Rows: []Row{mk("normal-unbound", 40), mk("rt-percpu", 12), mk("rt-unbound", 10), skipped, mk("go", 5), mk("ants", 20)}},
		{Name: Delayed, Rows: []Row{mk("normal-percpu", 900), mk("rt-percpu", 30), mk("rt-unbound", 40), mk("go", 300), mk("rt-percpu-batch", 1)}},
		{Name: Verity, Skipped: true, SkipReason: "test"},
	}}
}

// TestAnswerNamesBestRowsAndOutsideWins: the answer names the best gowq
// row of each table with its margin over the next workqueue row, the overall
// row with its worst distance and the runner-up, and the table where an
// outside pool beat every workqueue row (catches an answer that counts a Go
// pool as a workqueue row, ranks by the wrong direction, or hides the loss).
func TestAnswerNamesBestRowsAndOutsideWins(t *testing.T) {
	a := answerResults().Answer()
	if len(a.Tables) != 2 {
		t.Fatalf("%d tables answered, want 2 (the skipped one left out): %+v", len(a.Tables), a.Tables)
	}
	sub, del := a.Tables[0], a.Tables[1]
	if sub.Best.ID != "rt-unbound" || sub.Next.ID != "rt-percpu" || !sub.OutsideWins || sub.Outside.ID != "go" {
		t.Errorf("submit: best %s, next %v, outside %v wins %v", sub.Best.ID, sub.Next, sub.Outside, sub.OutsideWins)
	}
	if del.Best.ID != "rt-percpu" || del.OutsideWins {
		t.Errorf("delayed: best %s, outside wins %v", del.Best.ID, del.OutsideWins)
	}
	// rt-percpu is 1.2x and 1.0x from each table's best (mean 1.095),
	// rt-unbound 1.0x and 1.33x (1.155); the normal rows are in one table
	// each, so they do not count.
	if a.Overall == nil || a.Overall.ID != "rt-percpu" || a.BestIn != 1 || a.NextOverall == nil || a.NextOverall.ID != "rt-unbound" {
		t.Errorf("overall %+v (best in %d), next %+v", a.Overall, a.BestIn, a.NextOverall)
	}
	for _, want := range []string{
		"answer for this machine: RT per-CPU, the best workqueue row in 1 of 2 tables and at most 1.20x behind the best in the others",
		"next: RT unbound strict",
		"submit RT unbound strict 10.00 (1.20x ahead of RT per-CPU)",
		"delayed RT per-CPU 30.00 (1.33x ahead of RT unbound strict)",
		"An outside Go pool beat every workqueue row in submit (go statement 5.00, 2.00x better than RT unbound strict)",
	} {
		if !strings.Contains(a.Text, want) {
			t.Errorf("answer lacks %q:\n%s", want, a.Text)
		}
	}
	if strings.Contains(a.Text, "delayed (go") {
		t.Errorf("answer says a pool beat the workqueue rows in delayed:\n%s", a.Text)
	}
	if got := (&Results{}).Answer().Text; !strings.Contains(got, "no workqueue row was measured") {
		t.Errorf("empty run's answer %q", got)
	}
	if s := answerResults().Summary(); !strings.Contains(s, "== summary ==\nanswer for this machine: ") {
		t.Errorf("the summary does not open with the answer:\n%s", s)
	}
}

// TestLoadLineAskedAndGot: the load line says what the antagonist asked
// for and what it got (catches a line that gives only "kept N CPUs
// busy", which reads as if the burners got what they asked for).
func TestLoadLineAskedAndGot(t *testing.T) {
	s := fixedSubmit()
	s.Load.AskedCPUs, s.Load.OnCPUs, s.Load.ProcCPUs = 7.2, 2, 1.38
	if got, want := s.loadLine(), "load: 8 burners at 90% (qsort): asked for 7.20 CPUs of work on 2 CPUs, got 1.38 (69% of the 2.00 it could use);"; !strings.HasPrefix(got, want) {
		t.Errorf("load line\n%s\nwant it to start with\n%s", got, want)
	}
	s.Load.AskedCPUs, s.Load.OnCPUs, s.Load.ProcCPUs = 2, 1, 0.98
	if got := s.loadLine(); !strings.Contains(got, "asked for 2.00 CPUs of work on 1 CPU, got 0.98 (98% of the 1.00 it could use)") {
		t.Errorf("hog load line %s", got)
	}
}

// TestEveryTableNamesItsReference: every scenario's table names its
// reference row and says why it is that row (catches a scenario added
// without a reason, and a table whose comparison row goes unexplained).
func TestEveryTableNamesItsReference(t *testing.T) {
	res := fixedResults()
	for i := range res.Scenarios {
		s := &res.Scenarios[i]
		def := defOf(s.Name)
		if def.dfltWhy == "" {
			t.Errorf("%s: no reason for its reference row %q", s.Name, def.dflt)
		}
		tb, err := s.Table()
		if err != nil {
			t.Fatal(err)
		}
		if want := "reference: " + s.Row(s.Default).title() + ", " + def.dfltWhy; !strings.HasPrefix(tb.Reference, want) {
			t.Errorf("%s: reference %q, want it to start with %q", s.Name, tb.Reference, want)
		}
	}
}

// TestAnswerSaysWhenRunnerUpIsLevel: when the runner-up's geometric mean
// prints the same as the overall row's, the headline says the run did not
// separate them; when the overall row is the best workqueue row in no table,
// it does not read "the best workqueue row in 0 of N tables" (catches a
// headline that names one row as the answer on a margin its own figures
// do not show).
func TestAnswerSaysWhenRunnerUpIsLevel(t *testing.T) {
	mk := func(id string, v float64) Row {
		c, _ := configByID(id)
		return Row{ID: id, Label: c.Label, Kind: c.Kind, Class: c.Class, Items: 100,
			QueueToStart: Latency{Count: 100, P98Us: v, P99Us: v}}
	}
	answer := func(sub, del [3]float64) Answer {
		ids := []string{"rt-percpu", "rt-unbound", "highpri-percpu"}
		var s, d []Row
		for i, id := range ids {
			s, d = append(s, mk(id, sub[i])), append(d, mk(id, del[i]))
		}
		return (&Results{Scenarios: []ScenarioResult{{Name: Submit, Rows: s}, {Name: Delayed, Rows: d}}}).Answer()
	}
	// Level: rt-percpu 1.10x and 1.10x from each table's best (mean
	// 1.10), rt-unbound 1.00x and 1.21x (1.10), highpri-percpu 1.21x and
	// 1.00x (1.10).
	a := answer([3]float64{11, 10, 12.1}, [3]float64{11, 12.1, 10})
	if a.Overall == nil || a.NextOverall == nil {
		t.Fatalf("no overall or runner-up: %+v", a)
	}
	if fmt.Sprintf("%.2f", a.OverallMean) != fmt.Sprintf("%.2f", a.NextMean) {
		t.Fatalf("test figures do not print level: %.3f, %.3f", a.OverallMean, a.NextMean)
	}
	if !strings.Contains(a.Headline, "this run does not separate them") || strings.Contains(a.Headline, "next:") {
		t.Errorf("overall %s (%.3fx) and runner-up %s (%.3fx) print level, but the headline names one without saying so:\n%s",
			a.Overall.Label, a.OverallMean, a.NextOverall.Label, a.NextMean, a.Headline)
	}
	// Best in no table: rt-percpu 1.05x and 1.05x (mean 1.05), rt-unbound
	// 1.00x and 1.30x (1.14), highpri-percpu 1.30x and 1.00x (1.14).
	a = answer([3]float64{10.5, 10, 13}, [3]float64{10.5, 13, 10})
	if a.Overall == nil || a.Overall.ID != "rt-percpu" || a.BestIn != 0 {
		t.Fatalf("overall %+v, best in %d; want rt-percpu, best in 0", a.Overall, a.BestIn)
	}
	want := "answer for this machine: RT per-CPU, the best workqueue row in no table but at most 1.05x behind the best in each (geometric mean 1.05x; next:"
	if !strings.HasPrefix(a.Headline, want) {
		t.Errorf("headline\n%s\nwant it to open with\n%s", a.Headline, want)
	}
}

// TestAnswerRanksWorkqueueRowsOnly: kthread sets (package kthread) are
// named beside a table's best workqueue row with their margin, and never
// become a table's best row or the overall answer, which names a
// workqueue class (catches an answer that counts the kthread rows as
// workqueue rows: with erofs alone, the FIFO-low kthread set would be the
// answer for this machine).
func TestAnswerRanksWorkqueueRowsOnly(t *testing.T) {
	mk := func(id string, v float64) Row {
		c, _ := configByID(id)
		return Row{ID: id, Label: c.Label, Kind: c.Kind, Class: c.Class, Items: 100,
			QueueToStart: Latency{Count: 100, AvgUs: v, P98Us: v}}
	}
	erofs := ScenarioResult{Name: Erofs, Rows: []Row{mk("rt-percpu", 12), mk("rt-unbound", 10),
		mk("kthread", 9), mk("kthread-fifo", 8), mk("ants", 20)}}
	for _, res := range []*Results{
		{Scenarios: []ScenarioResult{erofs}},
		{Scenarios: []ScenarioResult{erofs, {Name: Submit, Rows: []Row{mk("rt-percpu", 10), mk("rt-unbound", 11)}}}},
	} {
		a := res.Answer()
		e := a.Tables[0]
		if e.Best == nil || e.Best.ID != "rt-unbound" || e.Next == nil || e.Next.ID != "rt-percpu" {
			t.Errorf("%d tables: erofs best %+v, next %+v; want rt-unbound, then rt-percpu", len(a.Tables), e.Best, e.Next)
		}
		if e.Kthread == nil || e.Kthread.ID != "kthread-fifo" || !e.KthreadWins || e.OutsideWins {
			t.Errorf("%d tables: erofs kthread %+v (wins %v), outside wins %v; want kthread-fifo, winning",
				len(a.Tables), e.Kthread, e.KthreadWins, e.OutsideWins)
		}
		if a.Overall == nil || a.Overall.Kind != KindGowq || (a.NextOverall != nil && a.NextOverall.Kind != KindGowq) {
			t.Errorf("%d tables: overall %+v, next %+v; want workqueue rows", len(a.Tables), a.Overall, a.NextOverall)
		}
		for _, want := range []string{
			"erofs RT unbound strict 10.00 (1.20x ahead of RT per-CPU)",
			"Best kthread set (package kthread, not ranked as a class): erofs kthread per-CPU FIFO-low 8.00 (1.25x ahead of RT unbound strict)",
		} {
			if !strings.Contains(a.Text, want) {
				t.Errorf("%d tables: answer lacks %q:\n%s", len(a.Tables), want, a.Text)
			}
		}
		if strings.Contains(a.Headline, "kthread") {
			t.Errorf("%d tables: the headline names a kthread set:\n%s", len(a.Tables), a.Headline)
		}
	}
}
