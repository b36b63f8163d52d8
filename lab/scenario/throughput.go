package scenario

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/stats"
)

// throughputWork is the common-case table: with no antagonist, for
// every class and every Go executor,
//
//   - idle (sparse) queue->start: one producer goroutine queues one item,
//     waits for it, sleeps throughputGap, and again;
//   - back-to-back throughput: the same producer queues empty items as
//     fast as it can through a ring of throughputRing work items (a gowq
//     item still pending is skipped for the next one in the ring, so
//     every accepted Queue is one execution; on a refusal the producer
//     yields its P with runtime.Gosched, where ants and the channel pool
//     block inside Submit), and the time runs until the last of them has
//     run. Allocations per item are runtime.MemStats
//     Mallocs over the phase divided by the items, CPU time is
//     getrusage(RUSAGE_SELF) user+system over the phase: the whole
//     process, so any spinning of workers counts.
//
// Each row's items are cut into the interleaving rounds, so that every
// row sees the same machine.
type throughputWork struct {
	sparse int // sparse items per row in all
	items  int // back-to-back items per row in all
	rounds int
	rings  map[*rowRun]*ring
}

// ring is one row's back-to-back state: its ring of items, which are
// r.tasks[1:], all running ring.item.
type ring struct {
	count atomic.Int64
	goal  atomic.Int64
	done  chan struct{}
	works []*wq.Work // the ring's work items, for batched rows
}

func (g *ring) item() {
	if g.count.Add(1) == g.goal.Load() {
		g.done <- struct{}{}
	}
}

const (
	throughputGap  = 200 * time.Microsecond
	throughputRing = 64

	// Per row, in all (the default and --quick).
	throughputSparse      = 1000
	throughputItems       = 200_000
	throughputQuickSparse = 200
	throughputQuickItems  = 20_000
	throughputRounds      = 8
	throughputQuickRounds = 4
)

func newThroughput(p *plan) *throughputWork {
	if p.quick {
		return &throughputWork{sparse: throughputQuickSparse, items: throughputQuickItems, rounds: throughputQuickRounds, rings: map[*rowRun]*ring{}}
	}
	return &throughputWork{sparse: throughputSparse, items: throughputItems, rounds: throughputRounds, rings: map[*rowRun]*ring{}}
}

func (w *throughputWork) setup(r *rowRun) {
	t := newTask(nil, signalDone)
	r.run.prepare(t)
	r.tasks = append(r.tasks, t)
	g := &ring{done: make(chan struct{}, 1)}
	w.rings[r] = g
	for range throughputRing {
		t := newTask(nil, nil)
		t.fn = g.item
		r.run.prepare(t)
		r.tasks = append(r.tasks, t)
		g.works = append(g.works, &t.w)
	}
}

// slice measures one round of row r: its share of the sparse items, then
// of the back-to-back items. d > 0 is the warm-up: a few of each, which
// go to a record that is thrown away.
func (w *throughputWork) slice(ctx context.Context, r *rowRun, d time.Duration, rec *record) {
	sparse, items := w.sparse/w.rounds, w.items/w.rounds
	if d > 0 {
		sparse, items = 10, 1000
	}
	start := stats.Now()
	t := r.tasks[0]
	for i := 0; i < sparse && ctx.Err() == nil; i++ {
		// nanosleep(2), not time.Sleep: a Go timer under 1 ms often
		// fires a whole ms late on an idle process (netpoll's timeout).
		labsys.SleepThread(throughputGap)
		t.tq = stats.Now()
		if !r.run.queue(t) {
			rec.missed++
			continue
		}
		<-t.done
		rec.lat.Add(t.lat)
		rec.items++
	}
	if ctx.Err() == nil {
		w.burst(r, items, rec)
	}
	rec.active += time.Duration(stats.Now() - start)
}

// burst queues n empty items back to back through r's ring and waits
// until they have all run.
func (w *throughputWork) burst(r *rowRun, n int, rec *record) {
	g := w.rings[r]
	ring := r.tasks[1:]
	g.count.Store(0)
	g.goal.Store(int64(n))
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0 := processCPU()
	t0 := stats.Now()
	queued, i := 0, 0
	if br, ok := r.run.(*wqRunner); ok && r.def.Batch > 0 {
		// One QueueBatch call per ring pass (pending items are skipped),
		// never more items in all than n.
		for queued < n {
			k := min(r.def.Batch, len(g.works), n-queued)
			got := br.queueBatch(g.works[:k])
			if got == 0 {
				runtime.Gosched() // every item pending: as below
			}
			queued += got
		}
	}
	for queued < n {
		if r.run.queue(ring[i%len(ring)]) {
			queued++
		} else {
			// The ring's next item is still pending: give the P to the
			// workers, as ants' and the channel pool's Submit do by
			// blocking when their workers are busy, instead of spinning
			// on the refusals with the P the workers need.
			runtime.Gosched()
		}
		i++
	}
	<-g.done
	t1 := stats.Now()
	cpu1 := processCPU()
	runtime.ReadMemStats(&ms1)
	rec.tputItems += int64(n)
	rec.tputNs += t1 - t0
	rec.tputCPU += cpu1 - cpu0
	rec.mallocs += int64(ms1.Mallocs - ms0.Mallocs)
}

// processCPU returns the process's user+system CPU time in ns
// (getrusage(RUSAGE_SELF)), 0 if it cannot be read.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func (w *throughputWork) describe(info *LoadInfo) {
	info.PeriodNs = int64(throughputGap)
	info.SparseItems = w.sparse
	info.ThroughputItems = w.items
	info.Ring = throughputRing
}

func (w *throughputWork) close() {}

// throughputOf returns a row's back-to-back figures from its record.
func throughputOf(rec *record) *BackToBack {
	if rec.tputItems == 0 || rec.tputNs <= 0 {
		return nil
	}
	n := float64(rec.tputItems)
	return &BackToBack{
		Items:           rec.tputItems,
		ItemsPerSec:     n / (float64(rec.tputNs) / 1e9),
		AllocsPerItem:   float64(rec.mallocs) / n,
		CPUSecPerMItems: float64(rec.tputCPU) / 1e9 / n * 1e6,
	}
}

// finishThroughput sets every row's items/s as a multiple of ants/v2's,
// measured in the same run.
func finishThroughput(s *ScenarioResult) {
	ants := s.Row("ants")
	if ants == nil || ants.Throughput == nil || ants.Throughput.ItemsPerSec <= 0 {
		s.Notes = append(s.Notes, "ants/v2 was not measured: no ratios.")
		return
	}
	for i := range s.Rows {
		if tp := s.Rows[i].Throughput; tp != nil {
			tp.VsAnts = tp.ItemsPerSec / ants.Throughput.ItemsPerSec
		}
	}
}

// throughputGoal is a gowq row's goals in the throughput table, against
// ants/v2 in the same run: speed, the least items/s as a multiple of
// ants'; cpu, the most CPU per item as a multiple of ants' (0: no CPU
// goal). ok is false for rows without goals (highpri, Go executors).
//   - normal per-CPU: 1.0x;
//   - normal unbound (the default queue, goroutine-backed): 1.0x, with
//     at most 1.5x ants' CPU per item;
//   - RT, unbatched: 0.5x;
//   - RT in batches of 64 (QueueBatch): 1.0x, with at most 2x ants' CPU
//     per item.
func throughputGoal(r *Row) (speed, cpu float64, ok bool) {
	if r.Kind != KindGowq || r.Throughput == nil {
		return 0, 0, false
	}
	switch {
	case r.Class == ClassRT && r.Batch > 0:
		return 1.0, 2.0, true
	case r.Class == ClassRT:
		return 0.5, 0, true
	case r.Class == ClassNormal && r.ID == "normal-unbound":
		return 1.0, 1.5, true
	case r.Class == ClassNormal:
		return 1.0, 0, true
	}
	return 0, 0, false
}

// goalList collects a throughput verdict's judgements by goal, so that
// the verdict names each goal once ("items/s at least 1.0x ants'") and
// then the rows judged against it.
type goalList struct {
	order []string
	rows  map[string][]string
}

func (g *goalList) add(goal, row string) {
	if g.rows == nil {
		g.rows = map[string][]string{}
	}
	if _, ok := g.rows[goal]; !ok {
		g.order = append(g.order, goal)
	}
	g.rows[goal] = append(g.rows[goal], row)
}

func (g *goalList) String() string {
	var parts []string
	for _, goal := range g.order {
		parts = append(parts, goal+": "+strings.Join(g.rows[goal], "; ")+".")
	}
	return strings.Join(parts, " ")
}

func speedGoal(goal float64) string { return fmt.Sprintf("Items/s at least %.1fx ants'", goal) }
func cpuGoal(limit float64) string  { return fmt.Sprintf("CPU per item at most %.1fx ants'", limit) }

// allocGoal is the allocation goal's text: no gowq row allocates per item.
func allocGoal(maxAllocs float64) (text string, met bool) {
	mark := "met"
	if maxAllocs >= 0.01 {
		mark = "NOT met"
	}
	return fmt.Sprintf("Allocations per item on gowq rows at most %.3f (goal 0: %s).", maxAllocs, mark), mark == "met"
}

// cpuGoalText judges row r's CPU per item against ants' (goal: at most
// limit times), or returns "" when r has no CPU goal or ants' CPU is
// unknown. met is false only for a goal that is not met.
func cpuGoalText(r, ants *Row, limit float64) (text string, met bool) {
	a := ants.Throughput.CPUSecPerMItems
	if limit == 0 || a <= 0 {
		return "", true
	}
	c := r.Throughput.CPUSecPerMItems
	mark := "met"
	if c > limit*a {
		mark = "NOT met"
	}
	return fmt.Sprintf("%s %.2fx: %s", r.Label, c/a, mark), mark == "met"
}

// throughputVerdict checks the throughput goals (throughputGoal) against
// ants/v2 in the same run, and that no gowq row allocates per item. The
// verdict names each goal, then each row's figure against it.
func throughputVerdict(s *ScenarioResult) Verdict {
	v := Verdict{Metric: "empty items/s, as a multiple of ants/v2's"}
	prefix := "verdict (" + v.Metric + "): "
	ants := s.Row("ants")
	if ants == nil || ants.Throughput == nil {
		v.Text = prefix + "not decided: ants/v2 was not measured."
		return v
	}
	v.Decided, v.Loser = true, "ants"
	var goals goalList
	all := true
	maxAllocs := 0.0
	for i := range s.Rows {
		r := &s.Rows[i]
		goal, cpu, ok := throughputGoal(r)
		if !ok {
			continue
		}
		if r.Class == ClassRT && (v.BestRT == "" || r.Throughput.VsAnts > s.Row(v.BestRT).Throughput.VsAnts) {
			v.BestRT = r.ID
		}
		mark := "met"
		if r.Throughput.VsAnts < goal {
			mark, all = "NOT met", false
		}
		goals.add(speedGoal(goal), fmt.Sprintf("%s %.2fx: %s", r.Label, r.Throughput.VsAnts, mark))
		if t, met := cpuGoalText(r, ants, cpu); t != "" {
			goals.add(cpuGoal(cpu), t)
			all = all && met
		}
		maxAllocs = max(maxAllocs, r.Throughput.AllocsPerItem)
	}
	if len(goals.order) == 0 {
		v.Decided = false
		v.Text = prefix + "not decided: no normal or RT row was measured."
		return v
	}
	at, met := allocGoal(maxAllocs)
	all = all && met
	v.RTWins = all // here: every goal of the table is met
	head := "every goal met"
	if !all {
		head = "NOT every goal met"
	}
	v.Text = prefix + head + ". " + goals.String() + " " + at
	return v
}

func fmtRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// tputCol is a column of the throughput table; "-" for rows without
// back-to-back figures.
func tputCol(head string, f func(t *BackToBack) string) column {
	return column{head, func(r *Row) string {
		if r.Throughput == nil {
			return "-"
		}
		return f(r.Throughput)
	}, false}
}
