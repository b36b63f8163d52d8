package scenario

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq/lab/plot"
)

//go:embed report.html.tmpl
var reportTmplText string

var reportTmpl = template.Must(template.New("report").Parse(reportTmplText))

// reportPage is what report.html.tmpl renders.
type reportPage struct {
	Title      string
	Answer     string // Results.Answer's headline: the title's question answered
	AnswerMore string // the rest of Results.Answer's text
	Started    string
	Finished   string
	Schema     string
	Machine    []fact
	Settings   []fact
	Scenarios  []reportScenario
	Printed    string // everything the run printed, as results.txt holds it
	SeedsNote  string // SeedsExplained
	Seeds      []SeedInfo
}

type fact struct{ Name, Value string }

type reportScenario struct {
	*ScenarioResult
	SeedList    string
	LoadLine    string
	Table       Table
	TableErr    string
	DefaultRow  string // title of the row the change columns compare against, when the table has change columns
	BestRTRow   string // title of the shaded row: the RT row the verdict is about
	PlotCaption string
	VerdictKind string // "yes", "no" or "undecided", for the style
	VerdictText string // Verdict.Text with non-breaking spaces between figures and units
	// VerdictWhy says why a verdict against RT that is partly "not
	// decided" is decided all the same; "" otherwise.
	VerdictWhy string
	SVG        template.HTML // the CDF plot, inline; "" when no row was measured
	PlotErr    string
}

// WriteHTML writes the run's report to w as one self-contained HTML page
// (wqlab writes it as wqlab-results/index.html): inline CSS, every plot
// inlined as SVG, no script and no reference to anything outside the
// page, so it opens from disk with no network. It holds the verdicts,
// the machine facts and settings, every scenario's table (from Table, so
// columns and scenarios added later appear without changes here) with
// its load line, footnotes, comparison row and queue->start CDF, and
// printed, the text the run printed (tables that are not in Results
// included), verbatim. It renders each plot (tens of ms each) and
// returns the template's or w's error; a plot that cannot be drawn is
// reported in the page instead.
func (r *Results) WriteHTML(w io.Writer, printed []byte) error {
	pg := reportPage{
		Title:      "wqlab results",
		Answer:     nbspUnits(r.Answer().Headline),
		AnswerMore: nbspUnits(r.Answer().Details),
		Started:    fmtTime(r.Started),
		Finished:   fmtTime(r.Finished),
		Schema:     r.Schema,
		Machine:    facts(reflect.ValueOf(r.Machine), ""),
		Settings:   facts(reflect.ValueOf(r.Settings), ""),
		Printed:    string(printed),
		SeedsNote:  SeedsExplained,
		Seeds:      Seeds(),
	}
	if !r.Started.IsZero() {
		pg.Title += ", " + pg.Started
	}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		rs := reportScenario{ScenarioResult: s, SeedList: strings.Join(s.Seeds, ", ")}
		if !s.Skipped {
			rs.LoadLine = strings.TrimSpace(s.loadLine())
			t, err := s.Table()
			if err != nil {
				rs.TableErr = err.Error()
			}
			rs.Table = t
			if d := s.Row(s.Default); d != nil && defOf(s.Name) != nil && defOf(s.Name).hasChange() {
				rs.DefaultRow = d.title()
			}
			if b := s.Row(s.Verdict.BestRT); b != nil {
				rs.BestRTRow = b.title()
			}
			rs.PlotCaption = s.PlotCaption()
			switch {
			case !s.Verdict.Decided:
				rs.VerdictKind = "undecided"
			case s.Verdict.RTWins:
				rs.VerdictKind = "yes"
			default:
				rs.VerdictKind = "no"
				if strings.Contains(s.Verdict.Text, "not decided") {
					rs.VerdictWhy = "Red although some parts are not decided: the parts marked NOT met failed in every round, which decides the verdict whatever the undecided parts would give."
				}
			}
			rs.VerdictText = nbspUnits(s.Verdict.Text)
			rs.LoadLine = nbspUnits(rs.LoadLine)
			rs.Table.Notes = slices.Clone(rs.Table.Notes) // shared with s.Notes
			for i := range rs.Table.Notes {
				rs.Table.Notes[i] = nbspUnits(rs.Table.Notes[i])
			}
			rs.Table.Caption = nbspUnits(rs.Table.Caption)
			rs.Table.Detail = nbspUnits(rs.Table.Detail)
			svg, err := s.plotSVG()
			if err != nil {
				rs.PlotErr = err.Error()
			}
			rs.SVG = svg
		}
		pg.Scenarios = append(pg.Scenarios, rs)
	}
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, pg); err != nil {
		return fmt.Errorf("scenario: rendering the HTML report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// plotSVG renders the scenario's plot as an inline <svg> element (the XML
// prolog dropped). It returns "" and nil when no row has a CDF.
func (s *ScenarioResult) plotSVG() (template.HTML, error) {
	var b bytes.Buffer
	if err := s.figure().Render(&b, "svg"); err != nil {
		if errors.Is(err, plot.ErrNoData) {
			return "", nil
		}
		return "", err
	}
	out := b.String()
	if i := strings.Index(out, "<svg"); i >= 0 {
		out = out[i:]
	}
	// Our own renderer's output, from numbers and our labels (gonum
	// escapes text); safe to inline.
	return template.HTML(out), nil //nolint:gosec
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// facts lists a struct's fields as name/value pairs, named by their JSON
// keys, nested structs flattened with a dot, so that fields added to
// Machine or Settings appear in the report without changes here.
func facts(v reflect.Value, prefix string) []fact {
	var out []fact
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			out = append(out, facts(fv, prefix+name+".")...)
			continue
		}
		if fv.IsZero() && strings.Contains(f.Tag.Get("json"), "omitempty") {
			continue
		}
		val := fmt.Sprint(fv.Interface())
		if strings.HasSuffix(name, "_ns") && fv.Kind() == reflect.Int64 {
			// Shown as a duration with its unit, so the name loses "_ns".
			name = strings.TrimSuffix(name, "_ns")
			val = time.Duration(fv.Int()).String()
		}
		if fv.Kind() == reflect.Slice {
			val = strings.Trim(val, "[]")
		}
		out = append(out, fact{prefix + name, val})
	}
	return out
}

// unitSpace matches the space between a figure and its unit.
var unitSpace = regexp.MustCompile(`(\d) (ns|us|ms|s|MiB/s|MiB|KiB|GiB|k|M)\b`)

// nbspUnits puts a non-breaking space between each figure and its unit,
// so that the browser never wraps "7.0 s" between the two.
func nbspUnits(s string) string { return unitSpace.ReplaceAllString(s, "${1}\u00a0${2}") }
