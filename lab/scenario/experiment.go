package scenario

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/gowq/wq/lab/driver"
)

// Suite is the name of the scenario suite as a driver.Experiment (what
// `wqlab` and `wqlab run` measure); its JSON document is the results
// document (SchemaVersion, driver.Schema(Suite)).
const Suite = "suite"

// Experiment returns the experiment that options o select, as a
// driver.Experiment: the blocking bursts when o.Scenarios names Blocking
// alone (it runs on its own, with no options: the others do not apply to
// it), else the suite, whose Validate is o.Validate, whose Run is Run(ctx,
// o) (partial results kept with ctx's error) and whose Result is a
// *Results.
func Experiment(o Options) driver.Experiment {
	if len(o.Scenarios) == 1 && strings.TrimSpace(o.Scenarios[0]) == Blocking {
		return driver.Func[*BlockingResult]{ID: Blocking, Rows: blockingConfigNames(),
			Check: func() error { return nil }, Measure: MeasureBlocking}
	}
	return suite{o}
}

type suite struct{ o Options }

func (suite) Name() string { return Suite }

func (suite) Configs() []string {
	var ids []string
	for _, c := range Configs() {
		ids = append(ids, c.ID)
	}
	return ids
}

func (s suite) Validate() error { return s.o.Validate() }

// Run returns Run's results also with an error, when there are: a run
// that ctx ended keeps the scenarios it measured.
func (s suite) Run(ctx context.Context) (driver.Result, error) {
	res, err := Run(ctx, s.o)
	if res == nil {
		return nil, err
	}
	return res, err
}

// WriteSection prints s's table (WriteTable) and, for verity, the
// fio-style completion latency of the default row and of the best RT
// row, as wqlab prints each scenario when it ends. It returns the
// first error writing to w.
func (s *ScenarioResult) WriteSection(w io.Writer) error {
	if err := s.WriteTable(w); err != nil || s.Name != Verity || s.Skipped {
		return err
	}
	ids := []string{s.Default}
	if s.Verdict.BestRT != "" && s.Verdict.BestRT != s.Default {
		ids = append(ids, s.Verdict.BestRT)
	}
	if _, err := fmt.Fprintln(w, "\nfio-style completion latency (all rows in verity-fio.txt):"); err != nil {
		return err
	}
	return s.WriteFio(w, ids...)
}

// Summary is the "== summary ==" block: one line per scenario, its
// verdict or why it was skipped.
func (r *Results) Summary() string {
	var b strings.Builder
	b.WriteString("\n== summary ==\n")
	b.WriteString(r.Answer().Text + "\n")
	for _, s := range r.Scenarios {
		if s.Skipped {
			fmt.Fprintf(&b, "%-8s skipped: %s\n", s.Name, s.SkipReason)
			continue
		}
		fmt.Fprintf(&b, "%-8s %s\n", s.Name, s.Verdict.Text)
	}
	return b.String()
}

// WriteTable prints every scenario's section (WriteSection), each after
// an empty line, then the summary: the tables wqlab prints during a run.
// It returns the first error writing to w.
func (r *Results) WriteTable(w io.Writer) error {
	for i := range r.Scenarios {
		fmt.Fprintln(w)
		if err := r.Scenarios[i].WriteSection(w); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, r.Summary())
	return err
}
