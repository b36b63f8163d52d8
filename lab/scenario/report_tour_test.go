package scenario

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"
)

func renderReport(t *testing.T, res *Results) string {
	t.Helper()
	var b bytes.Buffer
	if err := res.WriteHTML(&b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The Settings table names a duration without "_ns" since it shows it
// with its unit. Catches: "duration_ns | 24s".
func TestReportSettingsNameMatchesUnit(t *testing.T) {
	for _, f := range facts(reflect.ValueOf(Settings{DurationNs: int64(24 * time.Second)}), "") {
		if strings.HasSuffix(f.Name, "_ns") && strings.ContainsAny(f.Value, "smh") {
			t.Errorf("setting %s = %s: the name says ns, the value has a unit", f.Name, f.Value)
		}
		if f.Name == "duration" && f.Value != "24s" {
			t.Errorf("duration = %s, want 24s", f.Value)
		}
	}
}

// Figures and their units are joined by a non-breaking space in the
// HTML. Catches: "7.0 s in all" wrapped between 7.0 and s.
func TestReportFiguresKeepTheirUnit(t *testing.T) {
	res := fixedResults()
	for i := range res.Scenarios {
		res.Scenarios[i].SliceNs, res.Scenarios[i].DurationNs = 0, int64(7*time.Second)
	}
	page := renderReport(t, res)
	if strings.Contains(page, "7.0 s in all") || !strings.Contains(page, "7.0\u00a0s in all") {
		t.Error(`the report does not join "7.0" and "s" with a non-breaking space`)
	}
	if got := nbspUnits("p99 12.5 us, 3 rounds, 2 samples"); got != "p99 12.5\u00a0us, 3 rounds, 2 samples" {
		t.Errorf("nbspUnits: %q", got)
	}
}

// The verdict colours are explained, and a red verdict that is partly
// "not decided" says why it is red. Catches: unexplained green/red/olive
// bars, and red next to "not decided" without a word.
func TestReportVerdictColoursExplained(t *testing.T) {
	res := fixedResults()
	for i := range res.Scenarios {
		s := &res.Scenarios[i]
		if s.Name == Throughput {
			s.Verdict.Decided, s.Verdict.RTWins = true, false
			s.Verdict.Text = "verdict (x): NOT every goal met: a 0.4x (goal 0.5x: NOT met); b 1.0x (goal 1.0x: not decided)."
		}
	}
	page := renderReport(t, res)
	for _, want := range []string{`class="legend muted verdict-key"`, `<span class="verdict yes">green</span>`,
		`<span class="verdict no">red</span>`, `<span class="verdict undecided">olive</span>`,
		`<span class="verdict-why">Red although some parts are not decided`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// The note on an unmeasured default row names rows by the labels the
// table shows. Catches: "highpri-unbound" (a config ID) in the note.
func TestNotMeasuredNoteUsesLabels(t *testing.T) {
	def := defOf(Submit)
	s := &ScenarioResult{Name: Submit, Default: def.dflt}
	for _, d := range def.rows {
		r := Row{ID: d.ID, Label: d.Label, Note: d.Note, Kind: d.Kind, Class: d.Class, Items: 10,
			QueueToStart: Latency{Count: 10, MedianUs: 5, MaxUs: 9, P98Us: 8}}
		if d.ID == def.dflt {
			r.Skipped, r.Items = true, 0
		}
		s.Rows = append(s.Rows, r)
	}
	computeChanges(s, def.changes)
	if len(s.Notes) == 0 {
		t.Fatal("no note on the unmeasured default row")
	}
	note := s.Notes[len(s.Notes)-1]
	for _, r := range s.Rows {
		if strings.Contains(note, `"`+r.ID+`"`) && r.ID != r.title() {
			t.Errorf("note names config ID %q instead of its label %q: %s", r.ID, r.title(), note)
		}
	}
}
