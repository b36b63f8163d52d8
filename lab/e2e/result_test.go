package e2e

import (
	"math"
	"strings"
	"testing"

	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
)

// pass is one synthetic fio pass: n reads, 98% of them at base us and 2%
// at tail us (so p50 is base and p99 tail); then stall reads at stallUs.
type pass struct {
	n          int
	base, tail float64
	stall      int
	stallUs    float64
}

// synthRow builds a measured row of one load from its rounds' passes.
func synthRow(id string, kind driver.LoadKind, ps ...pass) *row {
	r := &row{id: id, total: map[driver.LoadKind]*stats.Samples{}, rounds: map[driver.LoadKind][]*stats.Samples{},
		bytes: map[driver.LoadKind]int64{}, runNs: map[driver.LoadKind]int64{}}
	total := stats.NewSamples(0)
	for _, p := range ps {
		s := stats.NewSamples(0)
		for i := range p.n {
			us := p.base
			if i%50 == 0 {
				us = p.tail
			}
			s.Add(int64(us * 1000))
		}
		for range p.stall {
			s.Add(int64(p.stallUs * 1000))
		}
		total.Merge(s)
		r.rounds[kind] = append(r.rounds[kind], s)
	}
	r.total[kind] = total
	r.bytes[kind], r.runNs[kind] = total.Len()*4096, int64(len(ps))*1e9
	return r
}

func same(p pass) []pass { return []pass{p, p, p} }

// stalledHogs is a hogs table whose best gowq row (the kthreads) stalls
// in round 2: its pooled p99 (20 us) meets the hogs goal against inline
// and ants (500 us) and beats the kernel (25 us), but its round-2 p99 is
// 60 ms.
func stalledHogs(t *testing.T) Table {
	t.Helper()
	k := driver.LoadHog
	fast := pass{n: 10000, base: 15, tail: 20}
	stalled := pass{n: 1000, base: 15, tail: 20, stall: 20, stallUs: 60000}
	slow := pass{n: 10000, base: 15, tail: 500}
	rows := []*row{
		synthRow(ExecInline, k, same(slow)...),
		synthRow(ExecAnts, k, same(slow)...),
		synthRow(ExecDefault, k, same(pass{n: 10000, base: 15, tail: 300})...),
		synthRow(ExecRTPerCPU, k, same(pass{n: 10000, base: 15, tail: 300})...),
		synthRow(ExecRTUnbound, k, same(pass{n: 10000, base: 15, tail: 300})...),
		synthRow(ExecKthread, k, fast, stalled, fast),
		synthRow(RowKernel, k, same(pass{n: 10000, base: 9, tail: 25})...),
	}
	tb := buildTable(k, driver.Facts{Antagonist: "hogs"}, rows, 3)
	kt := tb.row(ExecKthread)
	if kt.Clat.P99Us > 21 || kt.P99WorstRound < 50000 {
		t.Fatalf("synthetic kthread row: pooled p99 %v, worst round %v: want a pooled p99 that hides the stall", kt.Clat.P99Us, kt.P99WorstRound)
	}
	return tb
}

func goalOf(t *testing.T, gs []Goal, prefix string) Goal {
	t.Helper()
	for _, g := range gs {
		if strings.HasPrefix(g.Goal, prefix) {
			return g
		}
	}
	t.Fatalf("no goal %q in %+v", prefix, gs)
	return Goal{}
}

// A round that stalls adds few reads and barely moves the pooled p99;
// the goals are decided per round, so they are not decided, and say the
// per-round figures.
func TestStalledRoundLeavesGoalsUndecided(t *testing.T) {
	res := &Result{Name: Name, Tables: []Table{stalledHogs(t)}}
	res.Goals = goals(res)
	for _, p := range []string{"hogs:", "moonshot:"} {
		g := goalOf(t, res.Goals, p)
		if g.Verdict != "not decided" {
			t.Errorf("%s: verdict %q, want not decided (one round stalled): %s", p, g.Verdict, g.Measured)
		}
		if !strings.Contains(g.Measured, "60000") || len(g.Rounds) != 3 {
			t.Errorf("%s: measured %q, rounds %v: want the stalled round's p99 and 3 round figures", p, g.Measured, g.Rounds)
		}
	}
	v := res.Tables[0].Verdict
	if v.Decided || !strings.Contains(v.Text, "not decided") {
		t.Errorf("verdict %+v: want not decided", v)
	}
	var txt, html strings.Builder
	if err := res.WriteTable(&txt); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{txt.String(), html.String()} {
		if !strings.Contains(out, "p99 worst round") || !strings.Contains(out, "60000") || !strings.Contains(out, "decided per round") {
			t.Errorf("output lacks the worst round column, the stalled round or the method:\n%s", out)
		}
	}
}

// When every round agrees, the goals are decided: met or NOT met.
func TestSteadyRoundsDecideGoals(t *testing.T) {
	k := driver.LoadHog
	rows := []*row{
		synthRow(ExecInline, k, same(pass{n: 10000, base: 15, tail: 500})...),
		synthRow(ExecAnts, k, same(pass{n: 10000, base: 15, tail: 500})...),
		synthRow(ExecKthread, k, same(pass{n: 10000, base: 15, tail: 20})...),
		synthRow(RowKernel, k, same(pass{n: 10000, base: 9, tail: 15})...),
	}
	res := &Result{Name: Name, Tables: []Table{buildTable(k, driver.Facts{}, rows, 3)}}
	res.Goals = goals(res)
	if g := goalOf(t, res.Goals, "hogs:"); g.Verdict != "met" {
		t.Errorf("hogs goal %q (%s), want met", g.Verdict, g.Measured)
	}
	if g := goalOf(t, res.Goals, "moonshot:"); g.Verdict != "NOT met" {
		t.Errorf("moonshot %q (%s), want NOT met", g.Verdict, g.Measured)
	}
	if v := res.Tables[0].Verdict; !v.Decided || !v.RTWins {
		t.Errorf("verdict %+v: want a decided YES (25x in every round)", v)
	}
}

// A whole-run margin under 5% is noise, even when every round is on the
// same side; and an idle p50 goal whose rounds disagree is not decided
// even though the pooled p50 meets it.
func TestIdleNoiseAndStalledP50(t *testing.T) {
	k := driver.LoadNone
	opp := same(pass{n: 10000, base: 20, tail: 100})
	rt := same(pass{n: 10000, base: 20, tail: 101})
	rows := []*row{
		synthRow(ExecInline, k, opp...),
		synthRow(ExecAnts, k, opp...),
		synthRow(ExecDefault, k, pass{n: 10000, base: 20, tail: 100}, pass{n: 10000, base: 20, tail: 100}, pass{n: 3000, base: 30, tail: 100}),
		synthRow(ExecRTPerCPU, k, rt...),
		synthRow(ExecRTUnbound, k, rt...),
		synthRow(ExecKthread, k, rt...),
	}
	res := &Result{Name: Name, Tables: []Table{buildTable(k, driver.Facts{}, rows, 3)}}
	res.Goals = goals(res)
	v := res.Tables[0].Verdict
	if math.Abs(v.Ratio-100.0/101) > 0.005 {
		t.Fatalf("verdict ratio %v, want 0.99", v.Ratio)
	}
	if v.Decided || !strings.Contains(v.Text, "under 5%") {
		t.Errorf("verdict %+v: a 0.99x margin must not be decided", v)
	}
	g := goalOf(t, res.Goals, "idle:")
	if g.Verdict != "not decided" || !strings.Contains(g.Measured, "1.50") {
		t.Errorf("idle goal %q (%s): want not decided, with the 1.50x round", g.Verdict, g.Measured)
	}
}

func TestRoundMark(t *testing.T) {
	ge := func(x float64) bool { return x >= 10 }
	for _, c := range []struct {
		xs   []float64
		want string
	}{
		{[]float64{11, 12, 30}, "met"},
		{[]float64{1, 2, 3}, "NOT met"},
		{[]float64{11, 2, 30}, "not decided"},
		{[]float64{11, 12}, "not decided"},
		{nil, "not decided"},
	} {
		if got := roundMark(c.xs, ge); got != c.want {
			t.Errorf("roundMark(%v) = %q, want %q", c.xs, got, c.want)
		}
	}
}

// TestVerdictIsOneShortLine: a verdict is one line that says met, NOT met
// or not decided, the best RT row's p99 against the best opponent's, the
// ratio and the rounds' range, and leaves each round's p99 to the table
// (catches the long form, which listed every round of both rows and every
// round's ratio: over 250 characters with 3 rounds).
func TestVerdictIsOneShortLine(t *testing.T) {
	k := driver.LoadHog
	table := func(rtTail, inTail float64) Table {
		rows := []*row{
			synthRow(ExecInline, k, same(pass{n: 10000, base: 15, tail: inTail})...),
			synthRow(ExecAnts, k, same(pass{n: 10000, base: 15, tail: 500})...),
			synthRow(ExecKthread, k, same(pass{n: 10000, base: 15, tail: rtTail})...),
		}
		return buildTable(k, driver.Facts{}, rows, 3)
	}
	for _, c := range []struct {
		name string
		tb   Table
		want string
	}{
		{"met", table(20, 500), "verdict (p99 clat): met: kthread per-CPU FIFO-low 20.00 us, best opponent inline (go-fuse handler) 500.0 us: 25.00x (goal > 1x in every round; rounds 25.00x-25.00x)"},
		{"NOT met", table(500, 20), "verdict (p99 clat): NOT met: kthread per-CPU FIFO-low 500.0 us, best opponent inline (go-fuse handler) 20.00 us: 0.04x (goal > 1x in every round; rounds 0.04x-0.04x)"},
		{"stalled", stalledHogs(t), "verdict (p99 clat): not decided (the rounds disagree): kthread per-CPU FIFO-low 20.00 us, best opponent gowq default queue 300.0 us: 15.00x (goal > 1x in every round; rounds 0.01x-15.00x)"},
	} {
		if got := c.tb.Verdict.Text; got != c.want {
			t.Errorf("%s: verdict\n%s\nwant\n%s", c.name, got, c.want)
		}
		if v := c.tb.Verdict.Text; strings.Contains(v, "\n") || len(v) > 200 {
			t.Errorf("%s: verdict of %d characters or several lines: %q", c.name, len(v), v)
		}
	}
}
