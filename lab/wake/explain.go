package wake

// Outlier attribution (`wqlab wake --explain`): the rules and the
// evidence they read. The evidence readers are in explain_readers.go,
// the explainer that gathers a run's evidence in explain_collect.go, the
// rendering in explain_render.go.
//
// In explain mode every sample carries cheap evidence gathered around it,
// and every sample above the outlier threshold is given the likely cause
// of its lateness. Nothing below is touched when Options.Explain is off.
// In explain mode the item's function does two /proc reads and two
// getrusage calls (about 1 us each) after its start stamp, the queuer two
// around the queue call (outside the stamps), and the runtime tracer runs
// for the whole run (an event per goroutine and system-call transition),
// so explain mode measures a slightly heavier path than a plain run. The
// tracer also copies its batches through the Go heap (about 0.5 MB/s
// with a few thousand events per second), so an explain run has GC
// cycles of its own: 10-15 in a minute under hogs where a plain run has
// one; their pauses are in the trace and attributed like any other.
//
// The evidence, per sample:
//   - the queue call's own duration (t1-t0, stamps before and after
//     Queue/Submit) and the queuing thread's run_delay
//     (/proc/<pid>/task/<tid>/schedstat, 2nd field) over the call;
//   - the worker thread's run_delay and voluntary context switches
//     (getrusage(RUSAGE_THREAD).ru_nvcsw, the figure of
//     voluntary_ctxt_switches in /proc/thread-self/status) read by the
//     work function at the end of the previous item and at the start of
//     this one, on the same tid: the time the worker waited runnable for a
//     CPU, and the sleeps beyond the one park between two items;
//   - the sum of wq.Pools()' LockWaits (contended pool-lock
//     acquisitions) over the sample: read before a slice's first queue
//     call and, after a candidate outlier, before the next call, so the
//     delta can span the samples since the last reading (Evidence.LockSpan;
//     wq.Pools allocates about 10 KB, and reading it per sample made GC
//     cycles of its own);
//   - the library's own stage timestamps of the item (labsys.Stages, set by
//     labsys.SetStageRecorder for the run; gowq rows only): queue entry, pool
//     lock taken, futex_wake issued, worker back from futex_wait, worker
//     holding a P, item start. The largest gap between two recorded
//     stages (from the queue call's t0 to the work function's first
//     stamp) is the stage where the time went (Evidence.Stage);
//   - the Go runtime's stop-the-world pauses, overlapped with the
//     sample's window [queue, start]: their exact ranges from a
//     runtime/trace of the run (parsed with golang.org/x/exp/trace), or,
//     when the tracer cannot start, runtime.MemStats' PauseEnd/PauseNs
//     ring (read between slices whenever 200 cycles went by and at the
//     end). The ring is a poor fallback: PauseNs sums a cycle's two
//     pauses and PauseEnd is the end of the second (mark termination),
//     so a long first pause (sweep termination, which waits for every
//     thread running Go code to stop) is placed a whole mark phase too
//     late.

import (
	"strings"
	"time"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/stats"
)

// Cause is the likely cause of a late sample.
type Cause string

// The causes, in the order the summary prints them.
const (
	CauseGC       Cause = "GC STW"
	CauseQueuer   Cause = "queuer preempted"
	CauseSched    Cause = "scheduler"
	CauseLock     Cause = "lock wait"
	CausePWait    Cause = "P wait"
	CauseUnknown  Cause = "unknown (kernel wake-up)"
	CauseNotTaped Cause = "not instrumented" // raw probe rows
)

// Causes lists the causes in summary order.
func Causes() []Cause {
	return []Cause{CauseGC, CauseQueuer, CauseSched, CauseLock, CausePWait, CauseUnknown, CauseNotTaped}
}

// DefaultExplainThreshold is the outlier threshold's floor: a sample
// above max(DefaultExplainThreshold, 10x the raw probe's max) is an
// outlier, unless Options.ExplainThreshold sets it.
const DefaultExplainThreshold = 100 * time.Microsecond

// ExplainLinesPerRow caps the per-outlier lines printed per row; the
// rest are counted only.
const ExplainLinesPerRow = 20

// Evidence is what explain mode knows about one sample. Durations are in
// ns; a figure that could not be read (other thread, first item on a
// thread, no pools) is -1.
type Evidence struct {
	LatencyNs   int64 `json:"latency_ns"`
	QueueCallNs int64 `json:"queue_call_ns"` // t1-t0 of the queue call
	// StartedInCall: the item started before the queue call returned
	// (an RT worker preempting its queuer after futex_wake).
	StartedInCall bool  `json:"started_in_call"`
	QueuerDelay   int64 `json:"queuer_run_delay_ns"` // queuing thread's run_delay over the call, -1 unknown
	WorkerDelay   int64 `json:"worker_run_delay_ns"` // worker's run_delay from its previous item's end to this start, -1 unknown
	ExtraSleeps   int64 `json:"extra_sleeps"`        // worker's voluntary switches over that span beyond the one park, -1 unknown
	LockWaits     int64 `json:"lock_waits"`          // contended pool-lock acquisitions, -1 unknown (not a gowq row)
	// LockSpan is the number of samples LockWaits covers: 1 when the
	// readings were taken just before this sample and just before the
	// next, more when this sample's "before" reading is an older one
	// (wq.Pools allocates; explain reads it only at slice starts and
	// after candidate outliers, so as not to cause GC cycles itself).
	LockSpan    int64 `json:"lock_span"`
	GCOverlapNs int64 `json:"gc_overlap_ns"` // GC stop-the-world time inside [queue, start]
	// StagesNs are the item's stage points (StagePoints) in ns after the
	// queue call's t0, -1 for a stage not recorded (labsys.Stages' 0); nil
	// when the library recorded nothing (not a gowq row, or a record
	// missed).
	StagesNs []int64 `json:"stages_ns,omitempty"`
	// Stage names the largest gap between two recorded stage points
	// ("wake->woken"), StageNs is its length; "" and 0 without StagesNs.
	Stage   string `json:"stage,omitempty"`
	StageNs int64  `json:"stage_ns,omitempty"`
}

// StagePoints names the points of Evidence.StagesNs: the queue call's t0,
// the six labsys.Stages, and the work function's first stamp.
var StagePoints = []string{"call", "queue", "locked", "wake", "woken", "haveP", "start", "fn"}

// The indexes of StagePoints.
const (
	ptCall = iota
	ptQueue
	ptLocked
	ptWake
	ptWoken
	ptHaveP
	ptStart
	ptFn
)

// setStages fills e's stage fields from the library's record s (clock:
// CLOCK_MONOTONIC; off maps it onto stats.Now()) and the sample's t0
// and start (stats.Now()). Points out of order (a record of another
// instance) leave the stages unknown.
func (e *Evidence) setStages(s *labsys.Stages, off, t0, start int64) {
	raw := []int64{s.QueueNs, s.LockedNs, s.WakeNs, s.WokenNs, s.HavePNs, s.StartNs}
	pts := make([]int64, len(StagePoints))
	pts[ptCall], pts[ptFn] = 0, start-t0
	for i, v := range raw {
		pts[i+1] = -1
		if v != 0 {
			pts[i+1] = v - off - t0
		}
	}
	last, from := int64(0), ptCall
	var best int64 = -1
	name := ""
	for i := ptQueue; i <= ptFn; i++ {
		v := pts[i]
		if v < 0 && i != ptFn {
			continue
		}
		// A few hundred ns of slack: the two clocks are mapped onto each
		// other by two reads, and t0 is taken before the queue call.
		if v < last-1000 {
			return
		}
		if g := v - last; g > best {
			best, name = g, StagePoints[from]+"->"+StagePoints[i]
		}
		last, from = max(last, v), i
	}
	e.StagesNs, e.Stage, e.StageNs = pts, name, max(best, 0)
}

// stageEnd is the stage point that ends the largest gap, -1 without one.
func (e Evidence) stageEnd() int {
	if e.Stage == "" {
		return -1
	}
	for i, n := range StagePoints {
		if strings.HasSuffix(e.Stage, "->"+n) {
			return i
		}
	}
	return -1
}

// queuerShare is the part of the latency the queuing thread spent in the
// queue call before the item could start: the whole call when it
// returned first, else the time it waited runnable in the call (its
// run_delay), when known.
func (e Evidence) queuerShare() int64 {
	if !e.StartedInCall {
		return e.QueueCallNs
	}
	if e.QueuerDelay > 0 {
		return min(e.QueuerDelay, e.LatencyNs)
	}
	return 0
}

// Attribute gives the likely cause of a late sample, by precedence:
//
//  1. GC STW, when stop-the-world pauses cover at least half the latency
//     (a pause stops the queuer and the worker alike);
//  2. the library's stages, when their largest gap (Evidence.Stage) is at
//     least half the latency and says where the time went: a gap that
//     ends at queue entry, at the pool lock or at the futex_wake is the
//     queuing thread's (lock wait when it ends at the pool lock,
//     pool-lock acquisitions were contended and the queuer's run_delay
//     does not cover half of it; else queuer preempted); one that ends
//     when the worker is back from futex_wait is the kernel's wake-up
//     (scheduler when the worker's run_delay covers half of it; queuer
//     preempted when the worker's run_delay does not but the queuer's
//     does: the queuer lost its CPU at futex_wake, before the wake took
//     effect; else unknown (kernel wake-up)); one that ends when the
//     worker holds a P is a P wait. A gap that
//     ends at the item's start (the worker's own path, or an awake
//     worker's previous item) is left to the rules below;
//  3. queuer preempted, when the queuing thread's part of the window
//     (the whole queue call when it returned before the item started,
//     else its run_delay in the call) is at least half the latency;
//  4. scheduler, when the worker thread's run_delay since its previous
//     item (an upper bound of its run-queue wait in the window) is at
//     least half the latency;
//  5. lock wait, when pool-lock acquisitions were contended;
//  6. P wait, when the worker slept more than its one park (it went back
//     to sleep after its wake-up: no P was free);
//  7. the first of GC STW, queuer preempted, scheduler that covers at
//     least a quarter of the latency;
//  8. unknown (kernel wake-up): the kernel's wake-up path and what this
//     evidence cannot see (an IRQ, SMI or hypervisor steal on the CPU).
//
// Figures of -1 (unknown) count as absent.
func Attribute(e Evidence) Cause {
	shares := []struct {
		c  Cause
		ns int64
	}{{CauseGC, e.GCOverlapNs}, {CauseQueuer, e.queuerShare()}, {CauseSched, e.WorkerDelay}}
	if e.LatencyNs <= 0 {
		return CauseUnknown
	}
	if e.GCOverlapNs*2 >= e.LatencyNs {
		return CauseGC
	}
	if e.StageNs*2 >= e.LatencyNs {
		switch end := e.stageEnd(); {
		case end == ptLocked && e.LockWaits > 0 && e.QueuerDelay*2 < e.StageNs:
			return CauseLock
		case end >= ptQueue && end <= ptWake:
			return CauseQueuer
		case end == ptWoken:
			if e.WorkerDelay*2 >= e.StageNs {
				return CauseSched
			}
			if e.WorkerDelay >= 0 && e.QueuerDelay*2 >= e.StageNs {
				// The worker did not wait runnable, the queuer did: it was
				// preempted at futex_wake, before the wake took effect.
				return CauseQueuer
			}
			return CauseUnknown
		case end == ptHaveP:
			return CausePWait
		}
	}
	for _, s := range shares {
		if s.ns*2 >= e.LatencyNs {
			return s.c
		}
	}
	if e.LockWaits > 0 {
		return CauseLock
	}
	if e.ExtraSleeps > 0 {
		return CausePWait
	}
	for _, s := range shares {
		if s.ns*4 >= e.LatencyNs {
			return s.c
		}
	}
	return CauseUnknown
}

// Outlier is one sample above the threshold, with its evidence and cause.
type Outlier struct {
	Evidence
	Cause Cause `json:"cause"`
	t0    int64 // stats.Now() ns of the queue call
}

// RowExplain is one row's outliers.
type RowExplain struct {
	Config   string         `json:"config"`
	Outliers int            `json:"outliers"` // samples above the threshold
	Causes   map[Cause]int  `json:"causes"`   // outliers per cause
	Stages   map[string]int `json:"stages"`   // outliers per largest-gap stage (Evidence.Stage), those with stages
	Lines    []Outlier      `json:"lines"`    // the first ExplainLinesPerRow outliers
	QueueUs  *stats.Summary `json:"queue_call_us,omitempty"`
	counted  []Outlier      // every outlier above the floor, before the threshold is known
	queueS   *stats.Samples // queue-call durations of every sample
	lockPend int            // index+1 in counted of the outlier waiting for the next LockWaits reading
}

// Explain is the attribution of a whole run.
type Explain struct {
	ThresholdUs  float64       `json:"threshold_us"`
	ThresholdBy  string        `json:"threshold_by"` // how the threshold was chosen
	Rows         []*RowExplain `json:"rows"`
	GCCycles     uint64        `json:"gc_cycles"` // GC cycles during the run
	GCPauses     int           `json:"gc_pauses"` // STW pauses known (ring) during the run
	GCPauseMax   float64       `json:"gc_pause_max_us"`
	GCPausesLost uint64        `json:"gc_pauses_lost"`       // cycles whose pause left the 256-entry ring unread
	SchedLatP99  float64       `json:"sched_latency_p99_us"` // /sched/latencies:seconds over the run (goroutine runnable to running)
	SchedLatMax  float64       `json:"sched_latency_max_us"`
	STWPauseP99  float64       `json:"stw_gc_pause_p99_us"` // /sched/pauses/total/gc:seconds over the run
	STWPauseMax  float64       `json:"stw_gc_pause_max_us"`
	STWPauses    uint64        `json:"stw_gc_pauses"`
	// STWSource says where the pause ranges came from: "runtime/trace"
	// (exact) or "MemStats ring" (approximate), with the reason for the
	// fallback.
	STWSource string `json:"stw_source"`
	// TraceSTW counts the stop-the-world ranges of the trace, TraceSTWMax
	// is the longest (us).
	TraceSTW    int     `json:"trace_stw,omitempty"`
	TraceSTWMax float64 `json:"trace_stw_max_us,omitempty"`
}
