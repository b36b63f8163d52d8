package scenario

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// minRounds is the fewest rounds that give a verdict a spread: with
// fewer, a verdict is "not decided".
const minRounds = 3

// roundFigures holds each row's figures per interleaving round (one Row
// per round, built from that round's slice alone), by row ID.
type roundFigures map[string][]Row

// add records row r's figures of one round.
func (f roundFigures) add(def *scenarioDef, r *rowRun, rec *record) {
	if rec.lat.Len() == 0 && rec.tputItems == 0 {
		f[r.def.ID] = append(f[r.def.ID], Row{ID: r.def.ID})
		return
	}
	f[r.def.ID] = append(f[r.def.ID], rowResult(def, &rowRun{def: r.def, run: r.run, rec: rec}, false))
}

// applyMargin gives a computeVerdict verdict its margin (see
// Verdict.Ratio): the ratio of the whole run's best opponent to the best
// RT row, in the whole run and in every round. The verdict stays decided only when every round agrees
// with the whole run: all rounds above 1 for YES, all below 1 for NO.
// The rule is a paired one (both rows of a round saw the same machine),
// and with 8 rounds all agreeing by chance has a probability of 1/128.
func applyMargin(s *ScenarioResult, m metric, rounds roundFigures) {
	v := &s.Verdict
	if !v.Decided || v.BestRT == "" {
		return
	}
	opp := func(r *Row) bool {
		return r.Kind == KindBaseline || (r.Kind == KindGowq && r.Class == ClassNormal)
	}
	// ratio returns opponent over RT, > 1 when RT is better.
	ratio := func(rt, o float64) float64 {
		if m.higherBetter {
			rt, o = o, rt
		}
		if rt <= 0 {
			return math.NaN()
		}
		return o / rt
	}
	best := func(a, b float64) bool {
		if m.higherBetter {
			return a > b
		}
		return a < b
	}
	rt := s.Row(v.BestRT)
	var wholeOpp *Row
	for i := range s.Rows {
		r := &s.Rows[i]
		if opp(r) && !r.Skipped && r.Items > 0 && (wholeOpp == nil || best(m.get(r), m.get(wholeOpp))) {
			wholeOpp = r
		}
	}
	if rt == nil || wholeOpp == nil {
		return
	}
	v.Ratio = ratio(m.get(rt), m.get(wholeOpp))
	// Per round, RT against the whole run's best opponent: the pair the
	// verdict rests on, measured in the same round.
	rtRounds, oppRounds := rounds[rt.ID], rounds[wholeOpp.ID]
	var rtVals, oppVals []float64 // the metric itself per round
	for k := range min(len(rtRounds), len(oppRounds)) {
		if rtRounds[k].Items == 0 || oppRounds[k].Items == 0 {
			continue
		}
		if x := ratio(m.get(&rtRounds[k]), m.get(&oppRounds[k])); finite(x) {
			v.RoundRatios = append(v.RoundRatios, x)
			rtVals = append(rtVals, m.get(&rtRounds[k]))
			oppVals = append(oppVals, m.get(&oppRounds[k]))
		}
	}
	prefix := fmt.Sprintf("verdict (%s): ", v.Metric)
	body := strings.TrimPrefix(v.Text, prefix)
	body = strings.TrimSuffix(body, " The margin is under 5%: within run-to-run noise.")
	n := len(v.RoundRatios)
	if n < minRounds {
		v.Decided = false
		v.Text = prefix + fmt.Sprintf("not decided: %d round(s), too few to tell the margin from the noise (whole run: %s)", n, body)
		return
	}
	v.RatioMin, v.RatioMax = slices.Min(v.RoundRatios), slices.Max(v.RoundRatios)
	v.Detail = fmt.Sprintf("%s over %s per round: %.2fx-%.2fx (%d rounds; the metric per round: %s %s-%s, %s %s-%s); whole run %.2fx.",
		wholeOpp.Label, rt.Label, v.RatioMin, v.RatioMax, n,
		rt.Label, fmtMetric(m, slices.Min(rtVals)), fmtMetric(m, slices.Max(rtVals)),
		wholeOpp.Label, fmtMetric(m, slices.Min(oppVals)), fmtMetric(m, slices.Max(oppVals)), v.Ratio)
	switch {
	case v.RTWins && v.RatioMin > 1, !v.RTWins && v.RatioMax < 1:
		v.Text = prefix + strings.TrimSuffix(body, ".") + fmt.Sprintf("; every round agrees (%.2fx-%.2fx, %d rounds).", v.RatioMin, v.RatioMax, n)
	default:
		v.Decided = false
		v.Text = prefix + fmt.Sprintf("not decided: %s %s against %s %s (%.2fx in the whole run), but the rounds disagree (%.2fx-%.2fx, %d rounds).",
			rt.Label, fmtMetric(m, m.get(rt)), wholeOpp.Label, fmtMetric(m, m.get(wholeOpp)), v.Ratio, v.RatioMin, v.RatioMax, n)
	}
}

// applyThroughputMargin gives the throughput verdict its spread: every
// gowq row's items/s over ants/v2's in each round. A goal is met only
// when every round meets it, NOT met when no round does, and not decided
// otherwise; the verdict is decided only when every goal is.
func applyThroughputMargin(s *ScenarioResult, rounds roundFigures) {
	v := &s.Verdict
	if !v.Decided {
		return
	}
	ants := rounds["ants"]
	prefix := "verdict (" + v.Metric + "): "
	var goals goalList
	var spreads []string
	all, undecided := true, false
	maxAllocs := 0.0
	for i := range s.Rows {
		r := &s.Rows[i]
		goal, cpu, ok := throughputGoal(r)
		if !ok {
			continue
		}
		maxAllocs = max(maxAllocs, r.Throughput.AllocsPerItem)
		var xs []float64
		for k, rr := range rounds[r.ID] {
			if k < len(ants) && rr.Throughput != nil && ants[k].Throughput != nil && ants[k].Throughput.ItemsPerSec > 0 {
				xs = append(xs, rr.Throughput.ItemsPerSec/ants[k].Throughput.ItemsPerSec)
			}
		}
		mark := "met"
		var lo, hi float64
		if len(xs) > 0 {
			lo, hi = slices.Min(xs), slices.Max(xs)
		}
		switch {
		case len(xs) < minRounds:
			mark, undecided = fmt.Sprintf("not decided, %d round(s)", len(xs)), true
		case lo >= goal:
		case hi < goal:
			mark, all = "NOT met", false
		default:
			mark, undecided = "not decided", true
		}
		goals.add(speedGoal(goal), fmt.Sprintf("%s %.2fx: %s", r.Label, r.Throughput.VsAnts, mark))
		spreads = append(spreads, fmt.Sprintf("%s %.2fx-%.2fx", r.Label, lo, hi))
		if ar := s.Row("ants"); ar != nil && ar.Throughput != nil {
			// CPU per item is judged on the whole run: it is a sum over
			// the process, not a race between rows.
			if t, met := cpuGoalText(r, ar, cpu); t != "" {
				goals.add(cpuGoal(cpu), t)
				all = all && met
			}
		}
	}
	if len(goals.order) == 0 {
		return
	}
	at, met := allocGoal(maxAllocs)
	all = all && met
	v.RTWins = all && !undecided
	head := "every goal met"
	switch {
	case !all:
		head = "NOT every goal met"
	case undecided:
		head = "not decided"
		v.Decided = false
	}
	v.Text = prefix + head + ". " + goals.String() + " " + at
	// A goal is met only when every round meets it: the rounds' range of
	// items/s over ants' is why a goal is "not decided".
	v.Detail = fmt.Sprintf("items/s over ants' per round (%d rounds): %s.", len(ants), strings.Join(spreads, ", "))
}

// markIndicative says that a --quick verdict is indicative only.
func markIndicative(v *Verdict) {
	v.Indicative = true
	v.Text += " (--quick: indicative only; a full run has more rounds.)"
}

// fmtMetric formats a value of metric m as the tables do.
func fmtMetric(m metric, v float64) string {
	if m.higherBetter {
		return fmt.Sprintf("%.1f", v)
	}
	return fmtUs(v)
}
