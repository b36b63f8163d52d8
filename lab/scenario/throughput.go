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
//     every accepted Queue is one execution), and the time runs until the
//     last of them has run. Allocations per item are runtime.MemStats
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
		wq.SleepThread(throughputGap)
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
			queued += br.queueBatch(g.works[:k])
		}
	}
	for queued < n {
		if r.run.queue(ring[i%len(ring)]) {
			queued++
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

// throughputVerdict checks the throughput goals against ants/v2 in the
// same run: the normal class at least 1.0x, the RT class at least 0.5x
// unbatched and 1.0x in batches of 64 (with at most 2x ants' CPU per
// item), and no allocation per item on any gowq row.
func throughputVerdict(s *ScenarioResult) Verdict {
	v := Verdict{Metric: "empty items/s, as a multiple of ants/v2's"}
	prefix := "verdict (" + v.Metric + "): "
	ants := s.Row("ants")
	if ants == nil || ants.Throughput == nil {
		v.Text = prefix + "not decided: ants/v2 was not measured."
		return v
	}
	v.Decided, v.Loser = true, "ants"
	var parts []string
	all := true
	maxAllocs := 0.0
	for i := range s.Rows {
		r := &s.Rows[i]
		if r.Kind != KindGowq || r.Throughput == nil {
			continue
		}
		goal := 1.0
		if r.Class == ClassRT {
			goal = 0.5
			if r.Batch > 0 {
				goal = 1.0
				if a, c := ants.Throughput.CPUSecPerMItems, r.Throughput.CPUSecPerMItems; a > 0 {
					cmark := "met"
					if c > 2*a {
						cmark, all = "NOT met", false
					}
					parts = append(parts, fmt.Sprintf("%s CPU per item %.2fx ants' (goal 2x: %s)", r.Label, c/a, cmark))
				}
			}
			if v.BestRT == "" || r.Throughput.VsAnts > s.Row(v.BestRT).Throughput.VsAnts {
				v.BestRT = r.ID
			}
		} else if r.Class != ClassNormal {
			continue
		}
		mark := "met"
		if r.Throughput.VsAnts < goal {
			mark, all = "NOT met", false
		}
		parts = append(parts, fmt.Sprintf("%s %.2fx (goal %.1fx: %s)", r.Label, r.Throughput.VsAnts, goal, mark))
		maxAllocs = max(maxAllocs, r.Throughput.AllocsPerItem)
	}
	if len(parts) == 0 {
		v.Decided = false
		v.Text = prefix + "not decided: no normal or RT row was measured."
		return v
	}
	mark := "met"
	if maxAllocs >= 0.01 {
		mark, all = "NOT met", false
	}
	parts = append(parts, fmt.Sprintf("allocations per item on gowq rows at most %.3f (goal 0: %s)", maxAllocs, mark))
	v.RTWins = all // here: every goal of the table is met
	v.Text = prefix + strings.Join(parts, "; ") + "."
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
