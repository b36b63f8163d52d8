package e2e

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/scenario"
	"github.com/gowq/wq/lab/stats"
)

// Result is the e2e experiment's document (schema driver.Schema(Name),
// "gowq.wqlab.e2e/v1", also for e2e-seq): one table per load, the goals,
// where the kernel decompresses, and what the start cleaned.
type Result struct {
	Schema   string           `json:"schema"`
	Name     string           `json:"name"` // e2e or e2e-seq
	Started  time.Time        `json:"started"`
	Finished time.Time        `json:"finished"`
	Machine  scenario.Machine `json:"machine"`
	Settings Settings         `json:"settings"`
	Cleanup  CleanReport      `json:"cleanup"` // stale mounts and loop devices found at the start
	// CleanupNotRun is why the start did not look for what killed runs
	// left (not root, or the base could not be read); "" when it did.
	CleanupNotRun string   `json:"cleanup_not_run,omitempty"`
	Leftover      []string `json:"leftover,omitempty"` // mounts or loop devices of this run still there after Close (none expected)
	Decompression string   `json:"decompression"`      // where the kernel row decompressed, from its mount's sync_decompress
	Tables        []Table  `json:"tables"`
	Goals         []Goal   `json:"goals"`

	fio map[string]map[string]*stats.Samples // load -> row -> clat, for WriteFio
}

// Settings are the run's parameters after defaults.
type Settings struct {
	Sequential     bool   `json:"sequential"`
	BlockBytes     int    `json:"block_bytes"` // fio bs
	PassNs         int64  `json:"pass_ns"`     // one fio pass
	Rounds         int    `json:"rounds"`
	CorpusBytes    int64  `json:"corpus_bytes"`    // the file fio reads
	ContainerBytes int64  `json:"container_bytes"` // the Go rows' stored LZ4 blocks
	ImageBytes     int64  `json:"image_bytes,omitempty"`
	Loop           string `json:"loop,omitempty"`
	// SyncDecompress is the kernel row's mount's sync_decompress
	// (/sys/fs/erofs/<loop>/sync_decompress) after its last pass: "0
	// (auto)", "1 (force_on)" or "2 (force_off)"; "" when not read.
	SyncDecompress string `json:"sync_decompress,omitempty"`
	Source         string `json:"source"`
}

// Table is one load's table.
type Table struct {
	Load       string           `json:"load"` // none, burners, hogs
	Antagonist string           `json:"antagonist"`
	Note       string           `json:"note,omitempty"`
	PerCPU     []driver.CPUBusy `json:"per_cpu,omitempty"`
	AllPct     float64          `json:"all_pct"`
	Rounds     int              `json:"rounds"`
	Rows       []Row            `json:"rows"`
	Verdict    Verdict          `json:"verdict"`
}

// Row is one row of a table; latencies in us.
type Row struct {
	ID         string  `json:"id"`
	Label      string  `json:"label"`
	Skipped    bool    `json:"skipped,omitempty"`
	SkipReason string  `json:"skip_reason,omitempty"`
	Reads      int64   `json:"reads"`
	Clat       Latency `json:"clat"`
	MiBs       float64 `json:"bandwidth_mib_s"`
	// P99Chg is the change of p99 against the inline row, in %.
	P99Chg *float64 `json:"p99_change_pct,omitempty"`
	// RoundP50 and RoundP99 are the row's p50 and p99 in each round,
	// each over that round's reads alone. Clat pools every round's reads,
	// so a round that stalls (fio psync issues one read at a time) adds
	// few reads and barely moves Clat.P99Us; P99WorstRound is the highest
	// of RoundP99.
	RoundP50      []float64 `json:"round_p50_us,omitempty"`
	RoundP99      []float64 `json:"round_p99_us,omitempty"`
	P99WorstRound float64   `json:"p99_worst_round_us,omitempty"`
}

// Latency is fio's completion latency summary, us.
type Latency struct {
	Count    int64   `json:"count"`
	MinUs    float64 `json:"min_us"`
	MedianUs float64 `json:"median_us"`
	AvgUs    float64 `json:"avg_us"`
	MaxUs    float64 `json:"max_us"`
	StdevUs  float64 `json:"stdev_us"`
	P99Us    float64 `json:"p99_us"`
	P999Us   float64 `json:"p99_9_us"`
}

// Verdict says whether the best RT row (gowq RT or the FIFO-low
// kthreads) beat inline, ants and the default queue on p99 clat. Text is
// one line: met, NOT met or not decided (and why), the two rows' p99, the
// ratio against the goal (above 1x in every round) and the rounds' range. Ratio is
// the best of those over the best RT row (above 1: RT better), whole run;
// Rounds the same pair's ratio in each round, RatioMin/Max its range.
// Decided only when at least 3 rounds all agree with the whole run and
// the whole run's margin is at least 5% (noiseMargin).
type Verdict struct {
	Text     string    `json:"text"`
	Decided  bool      `json:"decided"`
	RTWins   bool      `json:"rt_wins"`
	BestRT   string    `json:"best_rt,omitempty"`
	Best     string    `json:"best_opponent,omitempty"`
	Ratio    float64   `json:"ratio,omitempty"`
	Rounds   []float64 `json:"round_ratios,omitempty"`
	RatioMin float64   `json:"ratio_min,omitempty"`
	RatioMax float64   `json:"ratio_max,omitempty"`
}

// Goal is one of the experiment's goals, as measured.
type Goal struct {
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	// Verdict is met (every round meets it), NOT met (no round does),
	// not decided (the rounds disagree, or fewer than 3), or not measured.
	Verdict string `json:"verdict"`
	// Rounds is the goal's figure in each round (a ratio), when it is
	// decided per round.
	Rounds []float64 `json:"round_figures,omitempty"`
}

// minRounds is the fewest rounds that decide a verdict or a goal, and
// noiseMargin the whole-run ratio within which (1/1.05 to 1.05) a verdict
// is run-to-run noise; both as lab/scenario's margins.
const (
	minRounds   = 3
	noiseMargin = 1.05
)

// roundMark decides a goal from its figure in each round, as the lab's
// throughput goals are: "met" when every round passes, "NOT met" when no
// round does, "not decided" otherwise or with fewer than minRounds.
func roundMark(xs []float64, pass func(float64) bool) string {
	n := 0
	for _, x := range xs {
		if pass(x) {
			n++
		}
	}
	switch {
	case len(xs) < minRounds:
		return "not decided"
	case n == len(xs):
		return "met"
	case n == 0:
		return "NOT met"
	}
	return "not decided"
}

func latencyOf(s *stats.Samples) Latency {
	m := s.Summary()
	return Latency{Count: m.Count, MinUs: m.Min, MedianUs: m.Median, AvgUs: m.Avg, MaxUs: m.Max,
		StdevUs: m.Stdev, P99Us: m.P99, P999Us: m.P999}
}

func pct(s *stats.Samples, p float64) float64 {
	if s == nil || s.Len() == 0 {
		return math.NaN()
	}
	v, err := s.Percentile(p)
	if err != nil {
		return math.NaN()
	}
	return v
}

var (
	rtRows   = []string{ExecRTPerCPU, ExecRTUnbound, ExecKthread}
	oppRows  = []string{ExecInline, ExecAnts, ExecDefault}
	gowqRows = []string{ExecDefault, ExecRTPerCPU, ExecRTUnbound, ExecKthread}
)

func buildTable(kind driver.LoadKind, f driver.Facts, rows []*row, rounds int) Table {
	t := Table{Load: string(kind), Antagonist: f.Antagonist, Note: f.Note, PerCPU: f.PerCPU, AllPct: f.AllPct, Rounds: rounds}
	if f.Error != "" {
		t.Note = driver.JoinNote(t.Note, "load not measured: "+f.Error)
	}
	for _, r := range rows {
		tr := Row{ID: r.id, Label: rowLabels[r.id]}
		s := r.total[kind]
		if s == nil || s.Len() == 0 {
			tr.Skipped = true
			tr.SkipReason = r.skip
			if tr.SkipReason == "" {
				tr.SkipReason = "not measured"
			}
			t.Rows = append(t.Rows, tr)
			continue
		}
		tr.Reads = s.Len()
		tr.Clat = latencyOf(s)
		if ns := r.runNs[kind]; ns > 0 {
			tr.MiBs = float64(r.bytes[kind]) / (1 << 20) / (float64(ns) / 1e9)
		}
		for _, rs := range r.rounds[kind] {
			tr.RoundP50 = append(tr.RoundP50, pct(rs, 50))
			tr.RoundP99 = append(tr.RoundP99, pct(rs, 99))
		}
		if len(tr.RoundP99) > 0 {
			tr.P99WorstRound = slices.Max(tr.RoundP99)
		}
		t.Rows = append(t.Rows, tr)
	}
	if in := t.row(ExecInline); in != nil && !in.Skipped {
		for i := range t.Rows {
			r := &t.Rows[i]
			if !r.Skipped && r.ID != ExecInline {
				v := stats.ChangePct(in.Clat.P99Us, r.Clat.P99Us)
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					r.P99Chg = &v
				}
			}
		}
	}
	t.Verdict = t.verdict()
	return t
}

func (t *Table) row(id string) *Row {
	for i := range t.Rows {
		if t.Rows[i].ID == id {
			return &t.Rows[i]
		}
	}
	return nil
}

// best returns the measured row of ids with the lowest p99, or nil.
func (t *Table) best(ids []string) *Row {
	var b *Row
	for _, id := range ids {
		if r := t.row(id); r != nil && !r.Skipped && (b == nil || r.Clat.P99Us < b.Clat.P99Us) {
			b = r
		}
	}
	return b
}

// roundRatios returns, for every round both have, num's p99 over den's.
// With several nums, the lowest of them in that round.
func (t *Table) roundRatios(den *Row, nums []string) []float64 {
	var out []float64
	for k := range den.RoundP99 {
		lo := math.Inf(1)
		for _, id := range nums {
			if r := t.row(id); r != nil && !r.Skipped && k < len(r.RoundP99) && !math.IsNaN(r.RoundP99[k]) {
				lo = min(lo, r.RoundP99[k])
			}
		}
		if !math.IsInf(lo, 1) && den.RoundP99[k] > 0 {
			out = append(out, lo/den.RoundP99[k])
		}
	}
	return out
}

func (t *Table) verdict() Verdict {
	v := Verdict{}
	prefix := "verdict (p99 clat): "
	rt, opp := t.best(rtRows), t.best(oppRows)
	if rt == nil || opp == nil {
		v.Text = prefix + "not decided: no RT row, or none of inline, ants and the default queue, was measured."
		return v
	}
	v.BestRT, v.Best = rt.ID, opp.ID
	v.Ratio = opp.Clat.P99Us / rt.Clat.P99Us
	// Per round, the whole run's pair, as lab/scenario's applyMargin.
	v.Rounds = t.roundRatios(rt, []string{opp.ID})
	if len(v.Rounds) > 0 {
		v.RatioMin, v.RatioMax = slices.Min(v.Rounds), slices.Max(v.Rounds)
	}
	v.RTWins = v.Ratio > 1
	agree := len(v.Rounds) >= minRounds
	for _, r := range v.Rounds {
		agree = agree && (r > 1) == v.RTWins
	}
	noise := v.Ratio < noiseMargin && v.Ratio > 1/noiseMargin
	v.Decided = agree && !noise
	// One line: the outcome, the two figures, the ratio and the rounds'
	// range; each round's p99 is in the table's "p99 per round" column.
	mark := "NOT met"
	if v.RTWins {
		mark = "met"
	}
	switch {
	case len(v.Rounds) < minRounds:
		mark = fmt.Sprintf("not decided (%d round(s), fewer than %d)", len(v.Rounds), minRounds)
	case !agree:
		mark = "not decided (the rounds disagree)"
	case noise:
		mark = "not decided (the margin is under 5%: run-to-run noise)"
	}
	rounds := "no round"
	if len(v.Rounds) > 0 {
		rounds = fmt.Sprintf("rounds %.2fx-%.2fx", v.RatioMin, v.RatioMax)
	}
	v.Text = fmt.Sprintf("%s%s: %s %s us, best opponent %s %s us: %.2fx (goal > 1x in every round; %s)",
		prefix, mark, rt.Label, fmtUs(rt.Clat.P99Us), opp.Label, fmtUs(opp.Clat.P99Us), v.Ratio, rounds)
	return v
}

func fmtUs(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "n/a"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func (r *Result) table(load string) *Table {
	for i := range r.Tables {
		if r.Tables[i].Load == load {
			return &r.Tables[i]
		}
	}
	return nil
}

// goals checks the experiment's goals on a result.
func goals(res *Result) []Goal {
	var g []Goal
	// Every row's file identical to its source.
	var bad []string
	measured := 0
	for _, t := range res.Tables {
		for _, r := range t.Rows {
			if r.Skipped && strings.HasPrefix(r.SkipReason, "read back") {
				bad = append(bad, r.ID)
			}
			if !r.Skipped {
				measured++
			}
		}
	}
	switch {
	case len(bad) > 0:
		g = append(g, Goal{Goal: "every file read through each row is identical to its source",
			Measured: "differs: " + strings.Join(slices.Compact(bad), ", "), Verdict: "NOT met"})
	case measured == 0:
		g = append(g, Goal{"every file read through each row is identical to its source", "no row ran", "not measured", nil})
	default:
		g = append(g, Goal{"every file read through each row is identical to its source",
			"every measured row's file read back whole, byte for byte, before measuring", "met", nil})
	}
	// Hogs: best gowq p99 <= 1/10 of inline's and of ants'.
	hog := res.table(string(driver.LoadHog))
	if hog == nil {
		hog = res.table(string(driver.LoadHogs))
	}
	goal := "hogs: the best gowq row's p99 <= 1/10 of inline's and of ants'"
	if hog == nil || hog.best(gowqRows) == nil || hog.row(ExecInline) == nil || hog.row(ExecInline).Skipped || hog.row(ExecAnts) == nil || hog.row(ExecAnts).Skipped {
		g = append(g, Goal{goal, "not measured", "not measured", nil})
	} else {
		b, in, an := hog.best(gowqRows), hog.row(ExecInline), hog.row(ExecAnts)
		ri, ra := in.Clat.P99Us/b.Clat.P99Us, an.Clat.P99Us/b.Clat.P99Us
		// Per round, the lower of inline's and ants' p99 over the whole
		// run's best gowq row's, in that round.
		rr := hog.roundRatios(b, []string{ExecInline, ExecAnts})
		g = append(g, Goal{goal, fmt.Sprintf("pooled: %s %s us; inline %s us (%.2fx), ants %s us (%.2fx); per round: %s %s us, inline %s, ants %s; lower of the two over %s per round %s",
			b.Label, fmtUs(b.Clat.P99Us), fmtUs(in.Clat.P99Us), ri, fmtUs(an.Clat.P99Us), ra,
			b.Label, fmtUsList(b.RoundP99), fmtUsList(in.RoundP99), fmtUsList(an.RoundP99), b.Label, fmtRatios(rr)),
			roundMark(rr, func(x float64) bool { return x >= 10 }), rr})
	}
	// Idle: gowq rows' p50 within 1.2x of inline's.
	idle := res.table(string(driver.LoadNone))
	goal = "idle: the gowq rows' p50 within 1.2x of inline's"
	if idle == nil || idle.row(ExecInline) == nil || idle.row(ExecInline).Skipped || idle.best(gowqRows) == nil {
		g = append(g, Goal{goal, "not measured", "not measured", nil})
	} else {
		in := idle.row(ExecInline)
		var parts []string
		marks := map[string]bool{}
		for _, id := range gowqRows {
			if r := idle.row(id); r != nil && !r.Skipped {
				var xs []float64
				for k := range min(len(r.RoundP50), len(in.RoundP50)) {
					if in.RoundP50[k] > 0 && !math.IsNaN(r.RoundP50[k]) {
						xs = append(xs, r.RoundP50[k]/in.RoundP50[k])
					}
				}
				m := roundMark(xs, func(x float64) bool { return x <= 1.2 })
				marks[m] = true
				parts = append(parts, fmt.Sprintf("%s pooled %.2fx, per round %s (%s)", r.Label, r.Clat.MedianUs/in.Clat.MedianUs, fmtRatios(xs), m))
			}
		}
		verdict := "met"
		switch {
		case marks["NOT met"]:
			verdict = "NOT met"
		case marks["not decided"]:
			verdict = "not decided"
		}
		g = append(g, Goal{goal, fmt.Sprintf("inline p50 %s us (rounds %s); %s", fmtUs(in.Clat.MedianUs), fmtUsList(in.RoundP50), strings.Join(parts, ", ")), verdict, nil})
	}
	// Kernel row under every load.
	var kl []string
	all := len(res.Tables) > 0
	for _, t := range res.Tables {
		if k := t.row(RowKernel); k != nil && !k.Skipped {
			kl = append(kl, fmt.Sprintf("%s p50 %s / p99 %s us", t.Load, fmtUs(k.Clat.MedianUs), fmtUs(k.Clat.P99Us)))
		} else {
			all = false
		}
	}
	verdict := "NOT met"
	if all {
		verdict = "met"
	}
	g = append(g, Goal{"the kernel EROFS row is reported under every load", cmpOr(strings.Join(kl, "; "), "not measured"), verdict, nil})
	// Moonshot.
	goal = "moonshot: the best gowq row's p99 under hogs <= the kernel's"
	if hog == nil || hog.best(gowqRows) == nil || hog.row(RowKernel) == nil || hog.row(RowKernel).Skipped {
		g = append(g, Goal{goal, "not measured", "not measured", nil})
	} else {
		b, k := hog.best(gowqRows), hog.row(RowKernel)
		rr := hog.roundRatios(k, []string{b.ID}) // b's p99 over the kernel's, per round
		g = append(g, Goal{goal, fmt.Sprintf("pooled: %s %s us, kernel %s us (%.2fx); per round: %s %s us, kernel %s us, ratio %s",
			b.Label, fmtUs(b.Clat.P99Us), fmtUs(k.Clat.P99Us), b.Clat.P99Us/k.Clat.P99Us,
			b.Label, fmtUsList(b.RoundP99), fmtUsList(k.RoundP99), fmtRatios(rr)),
			roundMark(rr, func(x float64) bool { return x <= 1 }), rr})
	}
	return g
}

// fmtUsList formats per-round latencies, us, as "20.94/61332/61204".
func fmtUsList(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	var p []string
	for _, x := range xs {
		p = append(p, fmtUs(x))
	}
	return strings.Join(p, "/")
}

// fmtRatios formats per-round ratios as "0.75/12.4/361x".
func fmtRatios(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	var p []string
	for _, x := range xs {
		if x >= 100 {
			p = append(p, fmt.Sprintf("%.0f", x))
		} else {
			p = append(p, fmt.Sprintf("%.2f", x))
		}
	}
	return strings.Join(p, "/") + "x"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// WriteJSON writes the result as one indented JSON document.
func (r *Result) WriteJSON(w io.Writer) error {
	r.Schema = driver.Schema(Name)
	return driver.WriteJSON(w, r)
}

func (r *Result) title() string {
	pattern := "random"
	if r.Settings.Sequential {
		pattern = "sequential"
	}
	return fmt.Sprintf("fio psync %d KiB %s reads through each file system", r.Settings.BlockBytes>>10, pattern)
}

var heads = []string{"config", "reads", "MiB/s", "clat avg", "p50", "p99 pooled", "p99.9", "max", "p99 chg", "p99 per round", "p99 worst round"}

func (t *Table) lines() []driver.Line {
	var ls []driver.Line
	for _, r := range t.Rows {
		if r.Skipped {
			ls = append(ls, driver.Line{Cells: []string{r.Label}, Skipped: true, Skip: r.SkipReason})
			continue
		}
		chg := "-"
		if r.P99Chg != nil {
			chg = stats.FormatPct(*r.P99Chg, 0)
		}
		var rp []string
		for _, v := range r.RoundP99 {
			rp = append(rp, fmtUs(v))
		}
		ls = append(ls, driver.Line{Cells: []string{r.Label, fmt.Sprint(r.Reads), fmt.Sprintf("%.1f", r.MiBs),
			fmtUs(r.Clat.AvgUs), fmtUs(r.Clat.MedianUs), fmtUs(r.Clat.P99Us), fmtUs(r.Clat.P999Us), fmtUs(r.Clat.MaxUs), chg, strings.Join(rp, " "), fmtUs(r.P99WorstRound)}})
	}
	return ls
}

func (t *Table) loadLine() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load: %s", t.Antagonist)
	if len(t.PerCPU) > 0 {
		b.WriteString("; CPUs busy:")
		for _, c := range t.PerCPU {
			fmt.Fprintf(&b, " cpu%d %.0f%%", c.CPU, c.BusyPct)
		}
		fmt.Fprintf(&b, " (all %.0f%%)", t.AllPct)
	}
	fmt.Fprintf(&b, "; %d rounds", t.Rounds)
	if t.Note != "" {
		b.WriteString("; note: " + t.Note)
	}
	return b.String()
}

// tableNote is printed under every table.
const tableNote = "clat in us (fio's completion latency of one read); every pass after invalidate=1; p99 pooled: over every read of all rounds " +
	"(fio psync issues one read at a time, so a round that stalls adds few reads and barely moves it); p99 chg: pooled, against inline; " +
	"verdicts and goals are decided per round, each round's p99 over its own reads; " +
	"verdict: the best RT row's p99 against the best opponent's (the best of inline, ants and the default queue), their ratio, and its range over the rounds"

// WriteTable prints one table per load in the seeds' box style, each with
// its verdict, then the goals, where the kernel decompresses, and what
// the start cleaned. It returns w's error.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "e2e: %s (seed 003; Go rows: go-fuse, %d KiB LZ4 blocks checked against SHA-256)\n",
		r.title(), BlockSize>>10)
	fmt.Fprintf(&b, "machine: %d CPUs (%s), Linux %s, %s; file: %.1f MiB of %s; container %.1f MiB; EROFS image %.1f MiB on %s\n",
		r.Machine.CPUs, cmpOr(r.Machine.CPUModel, "unknown CPU"), r.Machine.Kernel, r.Machine.GoVersion,
		float64(r.Settings.CorpusBytes)/(1<<20), r.Settings.Source, float64(r.Settings.ContainerBytes)/(1<<20),
		float64(r.Settings.ImageBytes)/(1<<20), cmpOr(r.Settings.Loop, "no loop device"))
	for _, t := range r.Tables {
		fmt.Fprintf(&b, "\n== %s (%s) ==\n%s\n", r.Name, t.Load, t.loadLine())
		driver.WriteBox(&b, heads, t.lines())
		b.WriteString(tableNote + "\n")
		b.WriteString(t.Verdict.Text + "\n")
	}
	b.WriteString("\n== goals ==\n")
	var gl []driver.Line
	for _, g := range r.Goals {
		gl = append(gl, driver.Line{Cells: []string{g.Goal, g.Verdict, g.Measured}})
	}
	driver.WriteBox(&b, []string{"goal", "verdict", "measured"}, gl)
	fmt.Fprintf(&b, "where the kernel decompresses: %s\n", r.Decompression)
	if r.CleanupNotRun != "" {
		fmt.Fprintf(&b, "cleanup at start: not run (%s)\n", r.CleanupNotRun)
	} else if r.Cleanup.Empty() {
		b.WriteString("cleanup at start: nothing stale\n")
	} else {
		b.WriteString("cleanup at start:\n" + r.Cleanup.String())
	}
	if len(r.Leftover) > 0 {
		fmt.Fprintf(&b, "LEFT AFTER CLOSE: %s\n", strings.Join(r.Leftover, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFio writes every measured row's completion latency the way fio
// prints it (seed 000's format, stats.WriteFioClat), per load. It
// returns stats.ErrNoSamples for a result read back from JSON.
func (r *Result) WriteFio(w io.Writer) error {
	if r.fio == nil {
		return stats.ErrNoSamples
	}
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			s := r.fio[t.Load][row.ID]
			if s == nil || row.Skipped {
				continue
			}
			if _, err := fmt.Fprintf(w, "%s [%s]: (jobs=1, %d reads)\n", row.Label, t.Load, row.Reads); err != nil {
				return err
			}
			if err := stats.WriteFioClat(w, s); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "   READ: bw=%.0fMiB/s (%.0fMB/s)\n\n", row.MiBs, row.MiBs*1.048576); err != nil {
				return err
			}
		}
	}
	return nil
}

var htmlTmpl = template.Must(template.New("e2e").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>wqlab {{.R.Name}}</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #999;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
.skip{color:#777}.v{font-weight:bold}pre{background:#f4f4f4;padding:1em;overflow-x:auto}</style></head><body>
<h1>wqlab {{.R.Name}}: {{.Title}}</h1>
<p>Linux {{.R.Machine.Kernel}}, {{.R.Machine.CPUs}} CPUs ({{.R.Machine.CPUModel}}), {{.R.Machine.GoVersion}}.</p>
{{range .Tables}}<h2>{{.T.Load}}</h2><p>{{.Load}}</p>
<table><tr>{{range $.Heads}}<th>{{.}}</th>{{end}}</tr>
{{range .Lines}}<tr>{{if .Skipped}}<td>{{index .Cells 0}}</td><td class="skip" colspan="10">skipped: {{.Skip}}</td>{{else}}{{range .Cells}}<td>{{.}}</td>{{end}}{{end}}</tr>
{{end}}</table><p>{{$.Note}}</p><p class="v">{{.T.Verdict.Text}}</p>{{end}}
<h2>Goals</h2><table><tr><th>goal</th><th>verdict</th><th>measured</th></tr>
{{range .R.Goals}}<tr><td>{{.Goal}}</td><td>{{.Verdict}}</td><td style="text-align:left">{{.Measured}}</td></tr>{{end}}</table>
<p>Where the kernel decompresses: {{.R.Decompression}}</p>
<h2>fio output</h2><pre>{{.Fio}}</pre>
<h2>Text</h2><pre>{{.Text}}</pre>
</body></html>
`))

// WriteHTML writes a self-contained HTML page of the result: every
// table with its verdict, the goals, the fio blocks and the text. It
// returns w's error.
func (r *Result) WriteHTML(w io.Writer) error {
	type tbl struct {
		T     Table
		Load  string
		Lines []driver.Line
	}
	var ts []tbl
	for _, t := range r.Tables {
		ts = append(ts, tbl{t, t.loadLine(), t.lines()})
	}
	var txt, fio strings.Builder
	r.WriteTable(&txt)
	r.WriteFio(&fio)
	return htmlTmpl.Execute(w, map[string]any{"R": r, "Title": r.title(), "Tables": ts, "Heads": heads,
		"Fio": fio.String(), "Text": txt.String(), "Note": tableNote})
}
