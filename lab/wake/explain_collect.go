package wake

// The explainer: it gathers each sample's evidence on the queuer (the
// readers of explain_readers.go, the library's stage stamps, the runtime
// tracer's stop-the-world ranges and runtime/metrics), keeps the
// outliers' evidence and attributes them with Attribute (explain.go).

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/stats"
)

// explainer collects a run's evidence. Its methods run on the queuer
// (one sample at a time) and between slices; not safe for concurrent use
// except through statReader.
type explainer struct {
	floor  int64 // ns: samples at or above it keep their evidence
	fixed  bool  // the threshold was set by the caller
	stat   *statReader
	rows   map[*row]*RowExplain
	order  []*RowExplain
	wallOf int64 // wall clock (UnixNano) minus stats.Now()
	pauses map[uint32][2]int64
	lastGC uint32
	lost   uint64
	m0     []metrics.Sample
	tfile  *os.File   // runtime/trace of the run (an unlinked temporary file), nil when not tracing
	anchor int64      // stats.Now() of the anchor log event
	stw    [][2]int64 // stop-the-world ranges from the trace (stats.Now() ns)
	tnote  string     // why there are none
	// slot receives the library's stages of the item being measured
	// (recordStages); stageOff maps their clock onto stats.Now().
	slot     atomic.Pointer[stageSlot]
	stageOff int64
}

// stageSlot holds the library's record of one item: w is the item
// watched, s and ok are written by the recorder on the worker thread
// before the item's function runs, read by the queuer after it ran.
type stageSlot struct {
	w  *wq.Work
	s  labsys.Stages
	ok bool
}

// recordStages is the run's labsys.SetStageRecorder function: it keeps the
// record of the watched item, and drops the others.
func (x *explainer) recordStages(s *labsys.Stages) {
	if sl := x.slot.Load(); sl != nil && sl.w == s.Work {
		sl.s, sl.ok = *s, true
	}
}

func newExplainer(threshold time.Duration) *explainer {
	x := &explainer{floor: int64(DefaultExplainThreshold), stat: newStatReader(), rows: map[*row]*RowExplain{},
		pauses: map[uint32][2]int64{}}
	if threshold > 0 {
		x.floor, x.fixed = int64(threshold), true
	}
	x.wallOf = time.Now().UnixNano() - stats.Now()
	x.stageOff = clockOffset()
	x.m0 = readMetrics()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	x.lastGC = ms.NumGC
	return x
}
func (x *explainer) row(r *row) *RowExplain {
	re := x.rows[r]
	if re == nil {
		re = &RowExplain{Config: r.c.name, Causes: map[Cause]int{}, Stages: map[string]int{}, queueS: stats.NewSamples(0)}
		x.rows[r] = re
		x.order = append(x.order, re)
	}
	return re
}

// sample records one sample's evidence (lock waits still to come for a
// gowq row: finish them with lockReading) and reports whether it is a
// candidate outlier (at or above the floor). t0, t1: stamps around the
// queue call; start: the item's first stamp; q0, q1: the queuer's
// readings around the call; prevEnd, st: the worker's readings at the end
// of its previous item and at this one's start; lockBefore: the last
// LockWaits sum, read lockSpan samples ago (-1: not a gowq row).
func (x *explainer) sample(r *row, t0, t1, start int64, q0, q1, prevEnd, st threadStat, lockBefore, lockSpan int64) bool {
	re := x.row(r)
	re.queueS.Add(t1 - t0)
	lat := start - t0
	if lat < x.floor {
		return false
	}
	e := Evidence{LatencyNs: lat, QueueCallNs: t1 - t0, StartedInCall: start < t1,
		QueuerDelay: -1, WorkerDelay: -1, ExtraSleeps: -1, LockWaits: -1}
	if q0.ok && q1.ok && q0.tid == q1.tid {
		e.QueuerDelay = q1.runDelay - q0.runDelay
	}
	if prevEnd.ok && st.ok && prevEnd.tid == st.tid {
		e.WorkerDelay = st.runDelay - prevEnd.runDelay
		e.ExtraSleeps = max(0, st.nvcsw-prevEnd.nvcsw-1)
	}
	if lockBefore >= 0 {
		e.LockWaits, e.LockSpan = lockBefore, lockSpan // made a delta by lockReading
	}
	re.counted = append(re.counted, Outlier{Evidence: e, t0: t0})
	if lockBefore >= 0 {
		re.lockPend = len(re.counted)
	}
	return true
}

// attachStages gives the candidate outlier that sample just recorded for
// r the library's stages s (t0, start: as given to sample).
func (x *explainer) attachStages(r *row, s *labsys.Stages, t0, start int64) {
	re := x.rows[r]
	if re == nil || len(re.counted) == 0 {
		return
	}
	re.counted[len(re.counted)-1].setStages(s, x.stageOff, t0, start)
}

// lockReading gives the pending outlier of r its LockWaits delta: now is
// the sum read before the next queue call (or after the slice).
func (x *explainer) lockReading(r *row, now int64) {
	re := x.rows[r]
	if re == nil || re.lockPend == 0 {
		return
	}
	o := &re.counted[re.lockPend-1]
	o.LockWaits = max(0, now-o.LockWaits)
	re.lockPend = 0
}

// readPauses copies the GC pause ring when cycles went by since the last
// copy; called between slices (ReadMemStats stops the world).
func (x *explainer) readPauses(force bool) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if !force && s[0].Value.Uint64()-uint64(x.lastGC) < 200 {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := len(ms.PauseEnd)
	if gone := int64(ms.NumGC) - int64(x.lastGC); gone > int64(n) {
		x.lost += uint64(gone) - uint64(n)
	}
	for k := ms.NumGC; k > x.lastGC && ms.NumGC-k < uint32(n); k-- {
		i := (k + uint32(n) - 1) % uint32(n)
		end := int64(ms.PauseEnd[i]) - x.wallOf
		x.pauses[k] = [2]int64{end - int64(ms.PauseNs[i]), end}
	}
	x.lastGC = ms.NumGC
}

// gcOverlap is the stop-the-world time inside [a, b] (stats.Now() ns):
// from the trace's ranges when there are, else from the MemStats ring.
func (x *explainer) gcOverlap(a, b int64) int64 {
	var ns int64
	if x.stw != nil {
		for _, p := range x.stw {
			if lo, hi := max(a, p[0]), min(b, p[1]); hi > lo {
				ns += hi - lo
			}
		}
		return ns
	}
	for _, p := range x.pauses {
		if lo, hi := max(a, p[0]), min(b, p[1]); hi > lo {
			ns += hi - lo
		}
	}
	return ns
}

// finish applies the threshold and the GC pauses, attributes every
// outlier and returns the run's Explain. probeMax is the raw probe's max
// in us (0 when not measured); probeOver holds the probe rows' samples at
// or above the floor, ns (their outliers are counted, not attributed).
func (x *explainer) finish(res *Result, probeMax float64, probeName string, probeOver map[string][]int64) *Explain {
	x.readPauses(true)
	x.stopTrace()
	x.stat.close()
	ex := &Explain{STWSource: "runtime/trace"}
	if x.stw == nil {
		if x.tnote == "" {
			x.tnote = "tracer not started"
		}
		ex.STWSource = "MemStats ring (approximate: " + x.tnote + ")"
	}
	for _, p := range x.stw {
		ex.TraceSTW++
		ex.TraceSTWMax = max(ex.TraceSTWMax, float64(p[1]-p[0])/1e3)
	}
	thr := float64(x.floor) / 1e3
	ex.ThresholdBy = "set by --explain-threshold"
	if !x.fixed {
		ex.ThresholdBy = fmt.Sprintf("%.0f us floor", thr)
		if probeMax > 0 && 10*probeMax > thr {
			thr = 10 * probeMax
			ex.ThresholdBy = fmt.Sprintf("10x the %s probe's max %.1f us", probeName, probeMax)
		} else if probeMax > 0 {
			ex.ThresholdBy = fmt.Sprintf("100 us floor (10x the %s probe's max %.1f us is lower)", probeName, probeMax)
		}
	}
	ex.ThresholdUs = thr
	for _, row := range res.Rows {
		if vs, ok := probeOver[row.Config]; ok {
			n := 0
			for _, v := range vs {
				if float64(v)/1e3 >= thr {
					n++
				}
			}
			ex.Rows = append(ex.Rows, &RowExplain{Config: row.Config, Outliers: n, Causes: map[Cause]int{CauseNotTaped: n}})
			continue
		}
		for _, re := range x.order {
			if re.Config != row.Config {
				continue
			}
			if re.queueS.Len() > 0 {
				s := re.queueS.Summary()
				re.QueueUs = &s
			}
			for i := range re.counted {
				o := &re.counted[i]
				if float64(o.LatencyNs)/1e3 < thr {
					continue
				}
				o.GCOverlapNs = x.gcOverlap(o.t0, o.t0+o.LatencyNs)
				o.Cause = Attribute(o.Evidence)
				re.Outliers++
				re.Causes[o.Cause]++
				if o.Stage != "" {
					re.Stages[o.Stage]++
				}
				if len(re.Lines) < ExplainLinesPerRow {
					re.Lines = append(re.Lines, *o)
				}
			}
			ex.Rows = append(ex.Rows, re)
		}
	}
	var pmax int64
	for _, p := range x.pauses {
		pmax = max(pmax, p[1]-p[0])
	}
	ex.GCPauses, ex.GCPauseMax, ex.GCPausesLost = len(x.pauses), float64(pmax)/1e3, x.lost
	m1 := readMetrics()
	ex.GCCycles = m1[0].Value.Uint64() - x.m0[0].Value.Uint64()
	ex.SchedLatP99, ex.SchedLatMax, _ = histDelta(x.m0[1].Value.Float64Histogram(), m1[1].Value.Float64Histogram())
	var n uint64
	ex.STWPauseP99, ex.STWPauseMax, n = histDelta(x.m0[2].Value.Float64Histogram(), m1[2].Value.Float64Histogram())
	ex.STWPauses = n
	return ex
}
