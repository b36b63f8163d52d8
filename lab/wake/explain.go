package wake

// Outlier attribution (issue 14 §1, `wqlab wake --explain`).
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
//   - the library's own stage timestamps of the item (wq.Stages, set by
//     wq.SetStageRecorder for the run; gowq rows only): queue entry, pool
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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	xtrace "golang.org/x/exp/trace"
	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/lab/driver"
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
	// queue call's t0, -1 for a stage not recorded (wq.Stages' 0); nil
	// when the library recorded nothing (not a gowq row, or a record
	// missed).
	StagesNs []int64 `json:"stages_ns,omitempty"`
	// Stage names the largest gap between two recorded stage points
	// ("wake->woken"), StageNs is its length; "" and 0 without StagesNs.
	Stage   string `json:"stage,omitempty"`
	StageNs int64  `json:"stage_ns,omitempty"`
}

// StagePoints names the points of Evidence.StagesNs: the queue call's t0,
// the six wq.Stages, and the work function's first stamp.
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
func (e *Evidence) setStages(s *wq.Stages, off, t0, start int64) {
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

// threadStat is one reading of a thread's scheduler figures.
type threadStat struct {
	tid      int
	runDelay int64 // ns waited runnable on a run queue (schedstat field 2)
	nvcsw    int64 // voluntary context switches
	ok       bool
}

// statReader reads the calling thread's figures cheaply: a pread of its
// cached /proc/self/task/<tid>/schedstat descriptor and a getrusage.
// Safe for concurrent use.
type statReader struct {
	mu  sync.Mutex
	fds map[int]int
}

func newStatReader() *statReader { return &statReader{fds: map[int]int{}} }

func (r *statReader) fd(tid int, fresh bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fd, ok := r.fds[tid]; ok && !fresh {
		return fd
	} else if ok {
		unix.Close(fd)
		delete(r.fds, tid)
	}
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(tid)+"/schedstat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	r.fds[tid] = fd
	return fd
}

// read reads the calling thread's figures; ok is false when the
// goroutine changed threads meanwhile or /proc could not be read.
func (r *statReader) read() threadStat {
	tid := unix.Gettid()
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return threadStat{}
	}
	var buf [96]byte
	var n int
	for try := 0; try < 2; try++ {
		fd := r.fd(tid, try > 0)
		if fd < 0 {
			return threadStat{}
		}
		var err error
		if n, err = unix.Pread(fd, buf[:], 0); err == nil && n > 0 {
			break
		}
		n = 0 // a dead thread's tid reused: open it afresh
	}
	delay, ok := parseSchedstat(buf[:n])
	if !ok || unix.Gettid() != tid {
		return threadStat{}
	}
	return threadStat{tid: tid, runDelay: delay, nvcsw: ru.Nvcsw, ok: true}
}

func (r *statReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tid, fd := range r.fds {
		unix.Close(fd)
		delete(r.fds, tid)
	}
}

// parseSchedstat returns the 2nd field (run_delay, ns) of a schedstat
// line "<on-cpu ns> <run_delay ns> <timeslices>".
func parseSchedstat(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(b) || b[i] != ' ' {
		return 0, false
	}
	i++
	var v int64
	j := i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		v = v*10 + int64(b[j]-'0')
	}
	if j == i || (j < len(b) && b[j] != ' ' && b[j] != '\n') {
		return 0, false
	}
	return v, true
}

// lockWaits sums PoolInfo.LockWaits over every live pool.
func lockWaits() int64 {
	var n int64
	for _, p := range wq.Pools() {
		n += p.LockWaits
	}
	return n
}

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
	s  wq.Stages
	ok bool
}

// recordStages is the run's wq.SetStageRecorder function: it keeps the
// record of the watched item, and drops the others.
func (x *explainer) recordStages(s *wq.Stages) {
	if sl := x.slot.Load(); sl != nil && sl.w == s.Work {
		sl.s, sl.ok = *s, true
	}
}

// clockOffset returns CLOCK_MONOTONIC (sched.Nanotime, the stages'
// clock) minus stats.Now(), from the closest of a few paired reads.
func clockOffset() int64 {
	var off, best int64 = 0, math.MaxInt64
	for range 5 {
		a := stats.Now()
		m := sched.Nanotime()
		b := stats.Now()
		if b-a < best {
			best, off = b-a, m-(a+b)/2
		}
	}
	return off
}

const traceCategory = "wqlab-wake-anchor"

// startTrace starts the runtime tracer, with an anchor event that maps
// the trace's clock onto stats.Now(). The trace goes to a temporary file
// (removed at once, read back by stopTrace), not to memory: a growing
// buffer on the heap would make GC cycles of its own.
func (x *explainer) startTrace() {
	f, err := os.CreateTemp("", "wqlab-wake-*.trace")
	if err != nil {
		x.tnote = err.Error()
		return
	}
	os.Remove(f.Name())
	if err := trace.Start(f); err != nil {
		f.Close()
		x.tnote = err.Error()
		return
	}
	x.tfile = f
	a := stats.Now()
	trace.Log(context.Background(), traceCategory, "anchor")
	x.anchor = (a + stats.Now()) / 2
}

// stopTrace stops the tracer and reads the stop-the-world ranges.
func (x *explainer) stopTrace() {
	f := x.tfile
	if f == nil {
		return
	}
	x.tfile = nil
	trace.Stop()
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		x.tnote = err.Error()
		return
	}
	stw, err := parseSTW(bufio.NewReaderSize(f, 1<<20), x.anchor)
	if err != nil {
		x.tnote = err.Error()
		return
	}
	x.stw = stw
}

// parseSTW returns the stop-the-world ranges of a runtime trace, in the
// clock of the anchor: anchor is the stats.Now() of the first log event
// of category traceCategory.
func parseSTW(r io.Reader, anchor int64) ([][2]int64, error) {
	tr, err := xtrace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	ranges := [][2]int64{}
	var off int64
	anchored := false
	begin := int64(-1)
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		switch ev.Kind() {
		case xtrace.EventLog:
			if !anchored && ev.Log().Category == traceCategory {
				off, anchored = int64(ev.Time())-anchor, true
			}
		case xtrace.EventRangeBegin:
			if strings.HasPrefix(ev.Range().Name, "stop-the-world") {
				begin = int64(ev.Time())
			}
		case xtrace.EventRangeEnd:
			if strings.HasPrefix(ev.Range().Name, "stop-the-world") && begin >= 0 {
				ranges = append(ranges, [2]int64{begin, int64(ev.Time())})
				begin = -1
			}
		}
	}
	if !anchored {
		return nil, errors.New("trace: no anchor event")
	}
	for i := range ranges {
		ranges[i][0] -= off
		ranges[i][1] -= off
	}
	return ranges, nil
}

var explainMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

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

func readMetrics() []metrics.Sample {
	s := make([]metrics.Sample, len(explainMetrics))
	for i, n := range explainMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return s
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
func (x *explainer) attachStages(r *row, s *wq.Stages, t0, start int64) {
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

// histDelta returns the p99 and max (us, bucket upper bounds; a finite
// lower bound for the last, unbounded bucket) and the count of the
// samples b recorded beyond a.
func histDelta(a, b *metrics.Float64Histogram) (p99, maxUs float64, n uint64) {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0, 0, 0
	}
	d := make([]uint64, len(b.Counts))
	for i := range d {
		d[i] = b.Counts[i] - a.Counts[i]
		n += d[i]
	}
	if n == 0 {
		return 0, 0, 0
	}
	upper := func(i int) float64 {
		v := b.Buckets[i+1]
		if math.IsInf(v, 1) {
			v = b.Buckets[i]
		}
		return v * 1e6
	}
	rank := uint64(math.Ceil(0.99 * float64(n)))
	var cum uint64
	for i, c := range d {
		cum += c
		if cum >= rank && p99 == 0 {
			p99 = upper(i)
		}
		if c > 0 {
			maxUs = upper(i)
		}
	}
	return p99, maxUs, n
}

// write prints the attribution: the threshold, the runtime's own
// figures, up to ExplainLinesPerRow lines per row, and the count per
// cause per row.
func (ex *Explain) write(b *strings.Builder) {
	fmt.Fprintf(b, "\nexplain: outliers above %.1f us (%s)\n", ex.ThresholdUs, ex.ThresholdBy)
	fmt.Fprintf(b, "runtime: %d GC cycles during the run, %d STW pauses (max %.1f us) in the MemStats ring", ex.GCCycles, ex.GCPauses, ex.GCPauseMax)
	if ex.GCPausesLost > 0 {
		fmt.Fprintf(b, ", %d cycles lost from the ring", ex.GCPausesLost)
	}
	fmt.Fprintf(b, "; /sched/pauses/total/gc:seconds %d pauses, p99 <= %.1f us, max <= %.1f us; /sched/latencies:seconds p99 <= %.1f us, max <= %.1f us\n",
		ex.STWPauses, ex.STWPauseP99, ex.STWPauseMax, ex.SchedLatP99, ex.SchedLatMax)
	fmt.Fprintf(b, "GC overlap from: %s", ex.STWSource)
	if ex.TraceSTW > 0 {
		fmt.Fprintf(b, ", %d stop-the-world ranges, longest %.1f us", ex.TraceSTW, ex.TraceSTWMax)
	}
	b.WriteByte('\n')
	var lines []driver.Line
	for _, re := range ex.Rows {
		for _, o := range re.Lines {
			lw := optN(o.LockWaits)
			if o.LockSpan > 1 {
				lw += fmt.Sprintf(" /%d", o.LockSpan)
			}
			lines = append(lines, driver.Line{Cells: []string{re.Config, us(o.LatencyNs), queueCell(o.Evidence),
				optUs(o.QueuerDelay), optUs(o.WorkerDelay), optN(o.ExtraSleeps), lw, us(o.GCOverlapNs), stageCell(o.Evidence), string(o.Cause)}})
		}
		if more := re.Outliers - len(re.Lines); more > 0 {
			lines = append(lines, driver.Line{Cells: []string{re.Config, fmt.Sprintf("+%d more", more)}})
		}
	}
	if len(lines) > 0 {
		driver.WriteBox(b, []string{"row", "latency", "queue call", "queuer run_delay", "worker run_delay", "extra sleeps", "lock waits", "GC overlap", "stage", "cause"}, lines)
		b.WriteString("us; queue call: t1-t0 of Queue/Submit (* the item started inside the call); run_delay: time waited runnable for a CPU (schedstat); extra sleeps: worker's voluntary switches beyond its park; lock waits /n: over the last n samples; stage: the largest gap between the library's stage stamps (call: t0, queue: queue entry, locked: pool lock, wake: futex_wake, woken: back from futex_wait, haveP: holding a P, start: item start, fn: the function's stamp); - unknown\n")
	}
	causes := Causes()
	heads := []string{"row", "outliers"}
	for _, c := range causes {
		heads = append(heads, string(c))
	}
	heads = append(heads, "queue call p50/p99")
	var sum []driver.Line
	for _, re := range ex.Rows {
		cells := []string{re.Config, fmt.Sprint(re.Outliers)}
		for _, c := range causes {
			cells = append(cells, fmt.Sprint(re.Causes[c]))
		}
		qc := "-"
		if re.QueueUs != nil {
			qc = fmt.Sprintf("%.1f/%.1f", re.QueueUs.Median, re.QueueUs.P99)
		}
		sum = append(sum, driver.Line{Cells: append(cells, qc)})
	}
	b.WriteString("outlier causes per row:\n")
	driver.WriteBox(b, heads, sum)
	tot := map[Cause]int{}
	all := 0
	for _, re := range ex.Rows {
		for c, n := range re.Causes {
			tot[c] += n
		}
		all += re.Outliers
	}
	parts := []string{}
	for _, c := range causes {
		if tot[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, tot[c]))
		}
	}
	fmt.Fprintf(b, "causes, all rows: %d outliers", all)
	if len(parts) > 0 {
		fmt.Fprintf(b, ": %s", strings.Join(parts, ", "))
	}
	b.WriteByte('\n')
	if st := ex.stageCounts(); len(st) > 0 {
		fmt.Fprintf(b, "stage where the time went, all rows (outliers with the library's stages): %s\n", strings.Join(st, ", "))
	}
}

// stageCounts returns "stage n" for every largest-gap stage of the
// outliers, most frequent first (ties by name).
func (ex *Explain) stageCounts() []string {
	n := map[string]int{}
	for _, re := range ex.Rows {
		for s, c := range re.Stages {
			n[s] += c
		}
	}
	names := make([]string, 0, len(n))
	for s := range n {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool {
		if n[names[i]] != n[names[j]] {
			return n[names[i]] > n[names[j]]
		}
		return names[i] < names[j]
	})
	out := make([]string, len(names))
	for i, s := range names {
		out[i] = fmt.Sprintf("%s %d", s, n[s])
	}
	return out
}

func stageCell(e Evidence) string {
	if e.Stage == "" {
		return "-"
	}
	return e.Stage + " " + us(e.StageNs)
}

func us(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e3) }

func optUs(ns int64) string {
	if ns < 0 {
		return "-"
	}
	return us(ns)
}

func optN(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func queueCell(e Evidence) string {
	if e.StartedInCall {
		return us(e.QueueCallNs) + "*"
	}
	return us(e.QueueCallNs)
}
