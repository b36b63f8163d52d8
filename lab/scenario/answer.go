package scenario

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// TableAnswer is one table's part of the report's answer: the workqueue
// row that measured best on the table's latency metric in the whole run,
// the next workqueue row, the best kthread set and the best outside pool
// (a Go executor).
//
// The answer ranks workqueue rows only (KindGowq: a wq class and queue
// type), because the title's question is which workqueue class to use. A
// kthread set (KindKthread: package kthread's kthread_worker pool) is
// gowq's too, but it is another API, measured in one table only: it is
// named beside the winner, with its margin, never ranked as a class.
type TableAnswer struct {
	Scenario string
	Metric   string // e.g. "avg clat", "p99 queue->start"
	Best     *Row   // the best workqueue row
	Next     *Row   // the next workqueue row, or nil
	Kthread  *Row   // the best kthread set, or nil
	Outside  *Row   // the best Go executor, or nil
	// OutsideWins is set when an outside pool measured better than every
	// workqueue row; KthreadWins when the best kthread set did.
	OutsideWins bool
	KthreadWins bool
	lower       bool // lower is better
	get         func(*Row) float64
	all         []*Row // every measured workqueue row, best first
}

// Answer is the report's answer to its title's question ("which worker
// class should latency-critical work use on this machine?"), from the
// whole run's figures of every table (Answer). It ranks workqueue rows
// only; kthread sets and outside pools are compared with the winner
// (TableAnswer).
type Answer struct {
	Tables []TableAnswer
	// Overall is the workqueue row with the smallest geometric mean of
	// its distance to each table's best workqueue row, among the rows
	// measured in the most tables; Worst is its largest such distance,
	// NextOverall the runner-up and its mean. Nil when no table has a
	// workqueue row.
	Overall     *Row
	OverallMean float64
	Worst       float64
	BestIn      int // tables where Overall is the best workqueue row
	NextOverall *Row
	NextMean    float64
	// Text is the answer in one line: Headline (the overall row and its
	// margins), then Details (each table's best workqueue row, where a
	// kthread set beat it or not, and where an outside pool beat it).
	Text, Headline, Details string
}

// answerMetric is the latency a table's answer compares: the verdict's
// metric (verity's avg clat; the throughput table's idle p50, which is
// its latency figure).
func answerMetric(s *ScenarioResult) (name string, get func(*Row) float64, lower bool, ok bool) {
	def := defOf(s.Name)
	if def == nil {
		return "", nil, false, false
	}
	m := def.verdict
	name = m.name
	if s.Name == Throughput {
		name = "idle p50 queue->start"
	}
	return name, m.get, !m.higherBetter, true
}

// Answer derives the report's one-line answer from every table that ran:
// per table the best workqueue row with its margin over the next one, the
// best kthread set's margin against it, the tables where an outside Go
// pool beat every workqueue row, and overall the workqueue row closest
// to the best in every table. Kthread rows are not workqueue rows: they
// never become Best, Next or Overall. It uses the whole
// run's figures; the verdicts say which margins every round confirms.
func (r *Results) Answer() Answer {
	var a Answer
	measured := func(x *Row) bool { return x != nil && !x.Skipped && x.Items > 0 }
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		if s.Skipped {
			continue
		}
		name, get, lower, ok := answerMetric(s)
		if !ok {
			continue
		}
		better := func(x, y *Row) bool {
			if lower {
				return get(x) < get(y)
			}
			return get(x) > get(y)
		}
		ta := TableAnswer{Scenario: s.Name, Metric: name, lower: lower, get: get}
		var wqRows []*Row
		for j := range s.Rows {
			x := &s.Rows[j]
			if !measured(x) || !finite(get(x)) || x.Batch > 0 {
				// A batched row is the same queue as its unbatched one,
				// queued another way (its idle items one per call).
				continue
			}
			switch x.Kind {
			case KindGowq:
				wqRows = append(wqRows, x)
			case KindKthread:
				if ta.Kthread == nil || better(x, ta.Kthread) {
					ta.Kthread = x
				}
			case KindBaseline:
				if ta.Outside == nil || better(x, ta.Outside) {
					ta.Outside = x
				}
			}
		}
		if len(wqRows) == 0 {
			continue
		}
		slices.SortStableFunc(wqRows, func(x, y *Row) int {
			switch {
			case better(x, y):
				return -1
			case better(y, x):
				return 1
			}
			return 0
		})
		ta.Best, ta.all = wqRows[0], wqRows
		if len(wqRows) > 1 {
			ta.Next = wqRows[1]
		}
		ta.OutsideWins = ta.Outside != nil && better(ta.Outside, ta.Best)
		ta.KthreadWins = ta.Kthread != nil && better(ta.Kthread, ta.Best)
		a.Tables = append(a.Tables, ta)
	}
	a.overall()
	a.Headline, a.Details = a.text()
	a.Text = strings.TrimSpace(a.Headline + " " + a.Details)
	return a
}

// distance is how far row x is behind the table's best workqueue row: 1 for
// the best, 2 for twice its latency.
func (t *TableAnswer) distance(x *Row) float64 {
	b, v := t.get(t.Best), t.get(x)
	if !t.lower {
		b, v = v, b
	}
	if b <= 0 {
		return math.NaN()
	}
	return v / b
}

func (a *Answer) overall() {
	if len(a.Tables) == 0 {
		return
	}
	type cand struct {
		row   *Row
		n     int
		logs  float64
		worst float64
		best  int
	}
	byID := map[string]*cand{}
	var order []string
	for i := range a.Tables {
		t := &a.Tables[i]
		for _, x := range t.all {
			d := t.distance(x)
			if !finite(d) {
				continue
			}
			c := byID[x.ID]
			if c == nil {
				c = &cand{row: x}
				byID[x.ID] = c
				order = append(order, x.ID)
			}
			c.n++
			c.logs += math.Log(d)
			c.worst = math.Max(c.worst, d)
			if x.ID == t.Best.ID {
				c.best++
			}
		}
	}
	most := 0
	for _, c := range byID {
		most = max(most, c.n)
	}
	var ranked []*cand
	for _, id := range order {
		if c := byID[id]; c.n == most {
			ranked = append(ranked, c)
		}
	}
	slices.SortStableFunc(ranked, func(x, y *cand) int {
		mx, my := x.logs/float64(x.n), y.logs/float64(y.n)
		switch {
		case mx < my:
			return -1
		case mx > my:
			return 1
		}
		return 0
	})
	if len(ranked) == 0 {
		return
	}
	c := ranked[0]
	a.Overall, a.OverallMean, a.Worst, a.BestIn = c.row, math.Exp(c.logs/float64(c.n)), c.worst, c.best
	if len(ranked) > 1 {
		a.NextOverall, a.NextMean = ranked[1].row, math.Exp(ranked[1].logs/float64(ranked[1].n))
	}
}

func (a *Answer) text() (headline, details string) {
	if len(a.Tables) == 0 || a.Overall == nil {
		return "answer: no workqueue row was measured, so this run cannot say which class to use.", ""
	}
	var b strings.Builder
	switch {
	case len(a.Tables) == 1:
		fmt.Fprintf(&b, "answer for this machine: %s, the best workqueue row of the one table measured", a.Overall.Label)
	case a.BestIn == len(a.Tables):
		fmt.Fprintf(&b, "answer for this machine: %s, the best workqueue row in every table (%d)", a.Overall.Label, len(a.Tables))
	case a.BestIn == 0:
		fmt.Fprintf(&b, "answer for this machine: %s, the best workqueue row in no table but at most %.2fx behind the best in each",
			a.Overall.Label, a.Worst)
	default:
		fmt.Fprintf(&b, "answer for this machine: %s, the best workqueue row in %d of %d tables and at most %.2fx behind the best in the others",
			a.Overall.Label, a.BestIn, len(a.Tables), a.Worst)
	}
	if a.NextOverall != nil {
		if fmt.Sprintf("%.2f", a.OverallMean) == fmt.Sprintf("%.2f", a.NextMean) {
			// Level at the precision shown: the order between them is
			// noise, and the headline must not read as a margin.
			fmt.Fprintf(&b, " (geometric mean %.2fx, level with %s: this run does not separate them)",
				a.OverallMean, a.NextOverall.Label)
		} else {
			fmt.Fprintf(&b, " (geometric mean %.2fx; next: %s, %.2fx)", a.OverallMean, a.NextOverall.Label, a.NextMean)
		}
	}
	b.WriteString(".")
	headline = b.String()
	b.Reset()
	b.WriteString("Best workqueue row per table: ")
	var parts, kthreads, outside []string
	for i := range a.Tables {
		t := &a.Tables[i]
		p := fmt.Sprintf("%s %s %s", t.Scenario, t.Best.Label, fmtAnswer(t, t.Best))
		if t.Next != nil {
			p += fmt.Sprintf(" (%.2fx ahead of %s)", t.distance(t.Next), t.Next.Label)
		}
		parts = append(parts, p)
		if t.Kthread != nil {
			rel := fmt.Sprintf("%.2fx behind", t.distance(t.Kthread))
			if t.KthreadWins {
				rel = fmt.Sprintf("%.2fx ahead of", 1/t.distance(t.Kthread))
			}
			kthreads = append(kthreads, fmt.Sprintf("%s %s %s (%s %s)", t.Scenario, t.Kthread.Label,
				fmtAnswer(t, t.Kthread), rel, t.Best.Label))
		}
		if t.OutsideWins {
			outside = append(outside, fmt.Sprintf("%s (%s %s, %.2fx better than %s)", t.Scenario, t.Outside.Label,
				fmtAnswer(t, t.Outside), 1/t.distance(t.Outside), t.Best.Label))
		}
	}
	b.WriteString(strings.Join(parts, "; "))
	if len(kthreads) > 0 {
		b.WriteString(". Best kthread set (package kthread, not ranked as a class): " + strings.Join(kthreads, "; "))
	}
	if len(outside) > 0 {
		b.WriteString(". An outside Go pool beat every workqueue row in " + strings.Join(outside, ", "))
	} else {
		b.WriteString(". No outside Go pool beat the best workqueue row in any table")
	}
	b.WriteString(". Whole-run figures, us; the verdicts say which margins every round confirms.")
	return headline, b.String()
}

// fmtAnswer formats a row's figure on the table's answer metric.
func fmtAnswer(t *TableAnswer, x *Row) string {
	if !t.lower {
		return fmt.Sprintf("%.1f", t.get(x))
	}
	return fmtUs(t.get(x))
}
