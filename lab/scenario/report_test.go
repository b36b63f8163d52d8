package scenario

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// fixedResults is a whole run with fixed numbers: every scenario of the
// catalog, each with every row measured (and a CDF), except one skipped
// row; the erofs scenario has an unknown extra so that it stays generic.
func fixedResults() *Results {
	res := &Results{Schema: SchemaVersion, Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Finished: time.Date(2026, 11, 30, 12, 2, 0, 0, time.UTC), Machine: DetectMachine(),
		Settings: Settings{Scenarios: Names(), DurationNs: int64(2 * time.Second), Antagonist: AntagonistCPUIO}}
	for si, def := range scenarioDefs {
		s := ScenarioResult{Name: def.name, Title: def.title, Seeds: def.seeds, Description: def.desc, Default: def.dflt,
			Load: LoadInfo{Antagonist: "8 burners at 90% (qsort)", ProcCPUs: 1.9}, Rounds: 4, SliceNs: int64(50 * time.Millisecond),
			Notes: def.notes}
		for i, d := range def.rows {
			r := Row{ID: d.ID, Label: d.Label, Note: d.Note, Kind: d.Kind, Class: d.Class}
			if i == 1 {
				r.Skipped, r.SkipReason = true, "not permitted here (test)"
				s.Rows = append(s.Rows, r)
				continue
			}
			base := float64(10 + 7*i + si)
			r.Items = int64(1000 + i)
			r.QueueToStart = Latency{Count: r.Items, MinUs: 1, MedianUs: base, AvgUs: base * 1.2, MaxUs: base * 50,
				P90Us: base * 2, P95Us: base * 3, P98Us: base * 4, P99Us: base * 5, P999Us: base * 9}
			if def.name == Verity {
				r.Clat = &Latency{Count: r.Items, AvgUs: base + 40, MaxUs: base * 60}
				r.BandwidthMiBs = 100 - float64(i)
				r.ClatCDF = []CDFPoint{{base, 0}, {base + 40, 0.5}, {base * 60, 1}}
			}
			if def.name == Throughput {
				r.Throughput = &BackToBack{Items: 1000, ItemsPerSec: 1e5 * base, RoundsPerSec: []float64{0.9e5 * base, 1.1e5 * base}}
			}
			if def.name == Delayed {
				pct := 50.0
				r.OnQueueCPUPct = &pct
			}
			r.CDF = []CDFPoint{{1, 0}, {base, 0.5}, {base * 5, 0.99}, {base * 50, 1}}
			s.Rows = append(s.Rows, r)
		}
		computeChanges(&s, def.changes)
		s.Verdict = computeVerdict(&s, def.verdict)
		res.Scenarios = append(res.Scenarios, s)
	}
	return res
}

// node helpers over golang.org/x/net/html.

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

func elems(root *html.Node, tag string) []*html.Node {
	var out []*html.Node
	walk(root, func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
	})
	return out
}

func text(n *html.Node) string {
	var b strings.Builder
	walk(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return strings.TrimSpace(b.String())
}

// TestWriteHTML parses the report and checks, for every scenario, that
// its table holds exactly the cells of Table(), its verdict and its
// inline plot; that the machine facts and the printed text are there;
// and that the page refers to nothing outside itself.
func TestWriteHTML(t *testing.T) {
	res := fixedResults()
	printed := "doctor: OK\n== submit: ... ==\nfio-style completion latency <&> marker-1234\n"
	var b bytes.Buffer
	if err := res.WriteHTML(&b, []byte(printed)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]*html.Node{}
	for _, tb := range elems(doc, "table") {
		if strings.Contains(attr(tb, "class"), "results") {
			tables[attr(tb, "data-scenario")] = tb
		}
	}
	if len(tables) != len(scenarioDefs) {
		t.Fatalf("%d result tables, want %d", len(tables), len(scenarioDefs))
	}
	for i := range res.Scenarios {
		s := &res.Scenarios[i]
		want, err := s.Table()
		if err != nil {
			t.Fatal(err)
		}
		tb := tables[s.Name]
		if tb == nil {
			t.Errorf("%s: no table", s.Name)
			continue
		}
		var heads []string
		for _, th := range elems(tb, "th") {
			heads = append(heads, text(th))
		}
		if strings.Join(heads, "|") != strings.Join(want.Heads, "|") {
			t.Errorf("%s: heads %q, want %q", s.Name, heads, want.Heads)
		}
		trs := elems(elems(tb, "tbody")[0], "tr")
		if len(trs) != len(want.Rows) {
			t.Fatalf("%s: %d rows, want %d", s.Name, len(trs), len(want.Rows))
		}
		for j, tr := range trs {
			wr := want.Rows[j]
			var cells []string
			for _, td := range elems(tr, "td") {
				cells = append(cells, text(td))
			}
			if attr(tr, "data-config") != wr.ID || cells[0] != wr.Title {
				t.Errorf("%s row %d: %q %q, want %q %q", s.Name, j, attr(tr, "data-config"), cells[0], wr.ID, wr.Title)
			}
			if wr.Skipped {
				if len(cells) != 2 || !strings.Contains(cells[1], wr.SkipReason) {
					t.Errorf("%s %s: skipped row cells %q", s.Name, wr.ID, cells)
				}
				continue
			}
			if strings.Join(cells[1:], "|") != strings.Join(wr.Cells, "|") {
				t.Errorf("%s %s: cells %q, want %q", s.Name, wr.ID, cells[1:], wr.Cells)
			}
		}
		sec := findID(doc, "scenario-"+s.Name)
		if sec == nil {
			t.Fatalf("%s: no section", s.Name)
		}
		wantCmp := "Comparison with seed " + strings.Join(s.Seeds, ", ") + ":"
		if len(s.Seeds) == 0 {
			wantCmp = "" // no seed, and the throughput table has no chg column
		}
		if got := text(sec); !strings.Contains(got, s.Verdict.Text) || !strings.Contains(got, wantCmp) {
			t.Errorf("%s: section lacks the verdict or the comparison:\n%s", s.Name, got)
		}
		if svgs := elems(sec, "svg"); len(svgs) != 1 {
			t.Errorf("%s: %d inline svg plots, want 1", s.Name, len(svgs))
		}
	}
	page := text(doc)
	for _, want := range []string{"marker-1234 ", "<&>", "online_cpus", "privileges.sched_fifo", "go_version", res.Machine.GoVersion, "duration"} {
		if !strings.Contains(page, want) && !strings.Contains(page, strings.TrimSpace(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained: no script, stylesheet link, frame or remote reference.
	walk(doc, func(n *html.Node) {
		if n.Type != html.ElementNode {
			return
		}
		switch n.Data {
		case "script", "link", "iframe", "img", "object", "embed":
			t.Errorf("external-asset element <%s>", n.Data)
		}
		for _, a := range n.Attr {
			if (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") {
				t.Errorf("<%s %s=%q> refers outside the page", n.Data, a.Key, a.Val)
			}
		}
	})
	if bytes.Contains(b.Bytes(), []byte("@import")) || bytes.Contains(b.Bytes(), []byte("url(")) {
		t.Error("the CSS loads something")
	}
}

func findID(root *html.Node, id string) *html.Node {
	var out *html.Node
	walk(root, func(n *html.Node) {
		if out == nil && n.Type == html.ElementNode && attr(n, "id") == id {
			out = n
		}
	})
	return out
}

// TestWriteHTMLSkipped: a skipped scenario shows its reason and no table;
// a scenario this package does not know shows the error, and the rest of
// the page is still written.
func TestWriteHTMLSkipped(t *testing.T) {
	res := fixedResults()
	res.Scenarios[0] = ScenarioResult{Name: Verity, Title: "v", Skipped: true, SkipReason: "cannot prepare data: disk full"}
	res.Scenarios = append(res.Scenarios, ScenarioResult{Name: "future", Title: "a later scenario"})
	var b bytes.Buffer
	if err := res.WriteHTML(&b, nil); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	v := findID(doc, "scenario-verity")
	if v == nil || !strings.Contains(text(v), "disk full") || len(elems(v, "table")) != 0 {
		t.Errorf("skipped verity section wrong")
	}
	f := findID(doc, "scenario-future")
	if f == nil || !strings.Contains(text(f), `unknown scenario "future"`) {
		t.Errorf("unknown scenario not reported")
	}
	if findID(doc, "scenario-delayed") == nil {
		t.Error("later scenarios missing")
	}
}

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
