package scenario

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

// fmtUs formats a latency in us the way the tables print it: two
// decimals below 100 us, one below 1000 us, none above.
func fmtUs(v float64) string {
	switch {
	case !finite(v):
		return "n/a"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func fmtChange(r *Row, m metric) string {
	v, ok := r.Change[m.key]
	if !ok {
		return "-"
	}
	return stats.FormatPct(v, 0)
}

func (r *Row) title() string {
	if r.Note == "" {
		return r.Label
	}
	return r.Label + " (" + r.Note + ")"
}

// Table is one scenario's table as cells, the form WriteTable prints
// and the HTML report renders; both draw from it, so a column added to a
// scenario appears in both.
type Table struct {
	Heads []string   // column heads; the first is "config"
	Rows  []TableRow // one per Row of the scenario, in order
	// Caption says what the change columns compare against (the row that
	// plays the seed's "before"), e.g. `latencies in us; chg: change
	// against "default erofs"`.
	Caption string
	Notes   []string // footnotes, one per line
	// Reference names the table's reference row and why it is that row
	// ("reference: normal unbound (default): the default queue, ...");
	// "" when the scenario has none or it was not measured.
	Reference string
	Verdict   string // the verdict line
	Detail    string // the figures behind the verdict's margin, or ""
}

// TableRow is one row of a Table.
type TableRow struct {
	ID    string   // configuration ID
	Title string   // label and note, the first cell
	Cells []string // one per Heads[1:]; nil when Skipped
	// Skipped rows carry their reason instead of cells.
	Skipped    bool
	SkipReason string
	Default    bool // the row the change columns compare against
	BestRT     bool // the verdict's best RT row
	Kind       Kind
	Class      Class
}

// Table returns the scenario's table as cells (latencies in
// microseconds, formatted as WriteTable prints them). It returns an error
// wrapping ErrSchema for a scenario this package does not know; a skipped
// scenario gives a Table with no Heads.
func (s *ScenarioResult) Table() (Table, error) {
	var t Table
	if s.Skipped {
		return t, nil
	}
	def := defOf(s.Name)
	if def == nil {
		return t, fmt.Errorf("%w: unknown scenario %q", ErrSchema, s.Name)
	}
	// "ran at" is the class read back from the row's threads, next to
	// the row's name: what ran, whatever the row asked for.
	t.Heads = []string{"config", "ran at"}
	for _, c := range def.columns {
		t.Heads = append(t.Heads, c.head)
	}
	for i := range s.Rows {
		r := &s.Rows[i]
		tr := TableRow{ID: r.ID, Title: r.title(), Skipped: r.Skipped, SkipReason: r.SkipReason,
			Default: r.ID == s.Default, BestRT: r.ID == s.Verdict.BestRT && r.ID != "", Kind: r.Kind, Class: r.Class}
		if !r.Skipped {
			tr.Cells = append(tr.Cells, cmp.Or(r.RanAt, "-"))
			for _, c := range def.columns {
				v := "-"
				if r.Kind != KindKernel || c.kernel {
					v = c.cell(r)
				}
				tr.Cells = append(tr.Cells, v)
			}
		}
		t.Rows = append(t.Rows, tr)
	}
	t.Caption = "latencies in us; ran at: the scheduling class read back from the threads that ran the row's items"
	if d := s.Row(s.Default); d != nil && def.hasChange() {
		t.Caption += fmt.Sprintf("; chg: change against %q", d.title())
	}
	t.Notes = s.Notes
	if d := s.Row(s.Default); d != nil && !d.Skipped {
		t.Reference = "reference: " + d.title()
		if def.dfltWhy != "" && s.Default == def.dflt {
			t.Reference += ", " + def.dfltWhy
		}
		if def.verdictFn == nil {
			t.Reference += ". The verdict compares the best RT row with the best Go pool or normal-class row of this run, whichever it is."
		} else {
			t.Reference += "."
		}
	}
	t.Verdict = s.Verdict.Text
	t.Detail = s.Verdict.Detail
	return t, nil
}

// WriteTable prints the scenario the way the seeds print their tables:
// a title, the load the antagonist achieved, one row per configuration
// (skipped rows with their reason), the footnotes and the verdict line.
// All latencies are in microseconds. It returns the writer's error.
func (s *ScenarioResult) WriteTable(w io.Writer) error {
	var b strings.Builder
	if len(s.Seeds) > 0 {
		fmt.Fprintf(&b, "== %s: %s (seed %s) ==\n", s.Name, s.Title, strings.Join(s.Seeds, ", "))
	} else {
		fmt.Fprintf(&b, "== %s: %s ==\n", s.Name, s.Title)
	}
	if s.Skipped {
		fmt.Fprintf(&b, "skipped: %s\n", s.SkipReason)
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString(s.loadLine())
	t, err := s.Table()
	if err != nil {
		return err
	}
	lines := make([]driver.Line, len(t.Rows))
	for i, r := range t.Rows {
		lines[i].Cells = append([]string{r.Title}, r.Cells...)
		lines[i].Skipped, lines[i].Skip = r.Skipped, r.SkipReason
	}
	driver.WriteBox(&b, t.Heads, lines)
	b.WriteString(t.Caption)
	b.WriteByte('\n')
	for _, n := range t.Notes {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if t.Reference != "" {
		b.WriteString(t.Reference + "\n")
	}
	b.WriteString(t.Verdict)
	b.WriteByte('\n')
	if t.Detail != "" {
		b.WriteString("rounds: " + t.Detail + "\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

func (s *ScenarioResult) loadLine() string {
	l := s.Load
	var b strings.Builder
	fmt.Fprintf(&b, "load: %s", l.Antagonist)
	switch {
	case l.AskedCPUs > 0 && l.OnCPUs > 0:
		// What the antagonist asked for and what it got: on a machine
		// where the measured rows and other processes take their share,
		// "8 burners at 90%" does not mean 7.2 busy CPUs.
		fmt.Fprintf(&b, ": asked for %.2f CPUs of work on %d CPU%s, got %.2f", l.AskedCPUs, l.OnCPUs, plural(l.OnCPUs), l.ProcCPUs)
		if ceil := math.Min(l.AskedCPUs, float64(l.OnCPUs)); ceil > 0 && l.ProcCPUs > 0 {
			fmt.Fprintf(&b, " (%.0f%% of the %.2f it could use)", 100*l.ProcCPUs/ceil, ceil)
		}
	case l.ProcCPUs > 0:
		fmt.Fprintf(&b, " (kept %.2f CPUs busy)", l.ProcCPUs)
	}
	if len(l.PerCPU) > 0 {
		b.WriteString("; CPUs busy:")
		for _, c := range l.PerCPU {
			fmt.Fprintf(&b, " cpu%d %.0f%%", c.CPU, c.BusyPct)
		}
		fmt.Fprintf(&b, " (all %.0f%%)", l.AllPct)
	}
	if l.Error != "" {
		fmt.Fprintf(&b, "; load not measured: %s", l.Error)
	}
	if w := busyWarning(l); w != "" {
		b.WriteString("; " + w)
	}
	if s.SliceNs > 0 {
		fmt.Fprintf(&b, "; %d rounds of %v slices\n", s.Rounds, fmtDur(s.SliceNs))
	} else {
		fmt.Fprintf(&b, "; %d rounds, %.1f s in all\n", s.Rounds, float64(s.DurationNs)/1e9)
	}
	if w := s.workloadLine(); w != "" {
		b.WriteString("workload: " + w + "\n")
	}
	if l.Note != "" {
		fmt.Fprintf(&b, "note: %s\n", l.Note)
	}
	return b.String()
}

// workloadLine describes how the scenario's items were produced.
func (s *ScenarioResult) workloadLine() string {
	l := s.Load
	switch s.Name {
	case Verity:
		io := "buffered reads (the file system refused O_DIRECT)"
		if l.DirectIO != nil && *l.DirectIO {
			io = "O_DIRECT reads"
		}
		return fmt.Sprintf("%d reader, %d MiB image, %s, %s", l.Readers, l.DataBytes>>20, io, l.DataSource)
	case Erofs:
		return fmt.Sprintf("%d readers, %s", l.Readers, l.DataSource)
	case Submit:
		if l.PeriodNs > 0 {
			return fmt.Sprintf("submitter every %s", fmtDur(l.PeriodNs))
		}
	case Throughput:
		return fmt.Sprintf("one producer goroutine; idle: %d items per row, one every %s; back to back: %d empty items per row through a ring of %d",
			l.SparseItems, fmtDur(l.PeriodNs), l.ThroughputItems, l.Ring)
	case Delayed:
		if l.DelayNs > 0 {
			return fmt.Sprintf("queueing thread %s; delay %s", l.Queuer, fmtDur(l.DelayNs))
		}
	}
	return ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func fmtDur(ns int64) string {
	if ns%1e6 == 0 {
		return fmt.Sprintf("%dms", ns/1e6)
	}
	return fmt.Sprintf("%.1fms", float64(ns)/1e6)
}

// computeChanges fills Row.Change against the default row (or, when it
// was not measured, the first measured row; then ref says which).
func computeChanges(s *ScenarioResult, ms []metric) {
	ref := s.Row(s.Default)
	if ref == nil || ref.Skipped || ref.Items == 0 || ref.Kind == KindKernel {
		ref = nil
		for i := range s.Rows {
			if !s.Rows[i].Skipped && s.Rows[i].Items > 0 && s.Rows[i].Kind != KindKernel {
				ref = &s.Rows[i]
				break
			}
		}
		if ref == nil {
			return
		}
		dflt := s.Default
		if d := s.Row(s.Default); d != nil {
			dflt = d.title() // the label the table shows, not the config ID
		}
		s.Notes = append(s.Notes, fmt.Sprintf("The default row %q was not measured; changes are against %q.", dflt, ref.title()))
		s.Default = ref.ID
	}
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.Skipped || r.Items == 0 || r.Kind == KindKernel {
			continue // kernel rows have no change columns
		}
		for _, m := range ms {
			if v := stats.ChangePct(m.get(ref), m.get(r)); finite(v) {
				if r.Change == nil {
					r.Change = map[string]float64{}
				}
				r.Change[m.key] = v
			}
		}
	}
}

// computeVerdict decides whether the best RT row (gowq's RT class: an RT
// workqueue or the FIFO-low kthread set) beat every Go baseline and every
// normal-class gowq row on metric m (kernel rows take no part), and
// writes the line printed under the table. It compares the whole run's
// numbers and flags margins within 5%; applyMargin then checks the
// verdict against every round.
func computeVerdict(s *ScenarioResult, m metric) Verdict {
	v := Verdict{Metric: m.name + " (us)"}
	if m.higherBetter {
		v.Metric = m.name + " (MiB/s)"
	}
	better := func(a, b float64) bool {
		if m.higherBetter {
			return a > b
		}
		return a < b
	}
	measured := func(r *Row) bool { return !r.Skipped && r.Items > 0 }
	var best *Row
	var skippedRT []string
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.Kind == KindBaseline || r.Class != ClassRT {
			continue
		}
		if !measured(r) {
			skippedRT = append(skippedRT, r.ID)
			continue
		}
		if best == nil || better(m.get(r), m.get(best)) {
			best = r
		}
	}
	prefix := fmt.Sprintf("verdict (%s): ", v.Metric)
	if best == nil {
		reason := "no RT row was selected"
		if len(skippedRT) > 0 {
			reason = "no RT row could be measured"
			if r := s.Row(skippedRT[0]); r != nil && r.SkipReason != "" {
				reason += " (" + r.SkipReason + ")"
			}
		}
		v.Text = prefix + "not decided: " + reason + "."
		return v
	}
	v.BestRT = best.ID
	bv := m.get(best)
	var opponents []*Row
	for i := range s.Rows {
		r := &s.Rows[i]
		if measured(r) && (r.Kind == KindBaseline || (r.Kind == KindGowq && r.Class == ClassNormal)) {
			opponents = append(opponents, r)
		}
	}
	if len(opponents) == 0 {
		v.Text = prefix + fmt.Sprintf("not decided: %s measured %s, but no Go baseline or normal-class row was measured.",
			best.Label, fmtUs(bv))
		return v
	}
	v.Decided = true
	var lost []*Row
	var bestOpp *Row
	for _, o := range opponents {
		if !better(bv, m.get(o)) {
			lost = append(lost, o)
		}
		if bestOpp == nil || better(m.get(o), m.get(bestOpp)) {
			bestOpp = o
		}
	}
	ratio := func(o *Row) string {
		a, b := bv, m.get(o)
		if m.higherBetter {
			a, b = b, a
		}
		if a <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1fx", b/a)
	}
	if len(lost) == 0 {
		v.RTWins = true
		v.Loser = bestOpp.ID
		noise := ""
		if r := m.get(bestOpp) / math.Max(bv, 1e-9); !m.higherBetter && r < 1.05 || m.higherBetter && bv/math.Max(m.get(bestOpp), 1e-9) < 1.05 {
			noise = " The margin is under 5%: within run-to-run noise."
		}
		v.Text = prefix + fmt.Sprintf("YES: %s %s beats every Go pool and normal-class row; the best of them, %s %s, by %s.%s",
			best.Label, fmtUs(bv), bestOpp.Label, fmtUs(m.get(bestOpp)), ratio(bestOpp), noise)
		return v
	}
	v.Loser = bestOpp.ID
	near := true
	for _, o := range lost {
		a, b := m.get(o), bv
		if m.higherBetter {
			a, b = b, a
		}
		near = near && b <= a*1.05
	}
	more := ""
	if len(lost) > 1 {
		more = fmt.Sprintf(", and %d more row(s)", len(lost)-1)
	}
	inv := "n/a"
	if a, b := m.get(bestOpp), bv; a > 0 && b > 0 {
		if m.higherBetter {
			a, b = b, a
		}
		inv = fmt.Sprintf("%.1fx", b/a)
	}
	v.Text = prefix + fmt.Sprintf("NO: %s %s loses to %s %s (%s better)%s.", best.Label, fmtUs(bv), bestOpp.Label, fmtUs(m.get(bestOpp)), inv, more)
	if near {
		v.Text += " The margin is under 5%: within run-to-run noise."
	}
	return v
}

// hasChange reports whether the scenario's table has change ("chg")
// columns.
func (d *scenarioDef) hasChange() bool {
	for _, c := range d.columns {
		if strings.HasSuffix(c.head, " chg") {
			return true
		}
	}
	return false
}

// idleBusyPct is the utilisation of all CPUs above which a measurement
// without antagonist is not called idle.
const idleBusyPct = 25

// busyWarning says, for a measurement without antagonist, whether the
// machine was idle as measured: "machine idle" or "machine NOT idle:
// other processes kept the CPUs 99% busy"; "" when there was an
// antagonist or the load was not measured.
func busyWarning(l LoadInfo) string {
	if !strings.HasPrefix(l.Antagonist, "none") || l.Error != "" || len(l.PerCPU) == 0 {
		return ""
	}
	if l.AllPct > idleBusyPct {
		return fmt.Sprintf("machine NOT idle: other processes kept the CPUs %.0f%% busy, so these are not an idle machine's figures", l.AllPct)
	}
	return "machine idle"
}
