package scenario

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gowq/wq/lab/stats"
)

// SchemaVersion names the layout of the results document; ReadJSON
// accepts only this value. See the package doc for the schema.
const SchemaVersion = "gowq.wqlab/v1"

// Results is the whole results document of one run, written as
// results.json.
type Results struct {
	Schema    string           `json:"schema"` // SchemaVersion
	Started   time.Time        `json:"started"`
	Finished  time.Time        `json:"finished"`
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
}

// Settings records the options the run used, after defaults.
type Settings struct {
	Scenarios   []string `json:"scenarios"`
	Configs     []string `json:"configs,omitempty"` // as given; empty means all
	DurationNs  int64    `json:"duration_ns"`       // measuring time per scenario
	Quick       bool     `json:"quick"`
	Antagonist  string   `json:"antagonist"`
	VeritySize  int64    `json:"verity_size_bytes"`
	ErofsBytes  int64    `json:"erofs_bytes"`
	Interleaved bool     `json:"interleaved"`      // always true: configurations alternate in short slices
	Kernel      bool     `json:"kernel,omitempty"` // the kernel's kworkers were recorded too (Options.Kernel)
	// ThroughputLoad: the throughput table ran under the antagonist
	// (Options.ThroughputLoad), not with none.
	ThroughputLoad bool `json:"throughput_load,omitempty"`
}

// Machine holds the facts about the machine the numbers came from.
type Machine struct {
	CPUs          int        `json:"cpus"`        // logical CPUs (runtime.NumCPU)
	OnlineCPUs    []int      `json:"online_cpus"` // CPUs this process may use
	GOMAXPROCS    int        `json:"gomaxprocs"`  // at start of the run
	CPUModel      string     `json:"cpu_model,omitempty"`
	Kernel        string     `json:"kernel"`         // uname -r
	KernelVersion string     `json:"kernel_version"` // uname -v
	Arch          string     `json:"arch"`           // GOARCH
	GoVersion     string     `json:"go_version"`
	RTThrottle    string     `json:"rt_throttle,omitempty"` // sched_rt_runtime_us/sched_rt_period_us
	FioInstalled  bool       `json:"fio_installed"`
	Privileges    Privileges `json:"privileges"`
}

// Privileges says which worker classes and antagonists this process may
// use. A false field comes with the reason in the matching *Reason field.
type Privileges struct {
	UID           int    `json:"uid"`
	EUID          int    `json:"euid"`
	CapSysNice    bool   `json:"cap_sys_nice"`
	SchedFIFO     bool   `json:"sched_fifo"` // RT rows can run
	SchedFIFONote string `json:"sched_fifo_reason,omitempty"`
	Nice20        bool   `json:"nice_minus_20"` // highpri rows and the nice -20 hog can run
	Nice20Note    string `json:"nice_minus_20_reason,omitempty"`
}

// ScenarioResult is one scenario's table.
type ScenarioResult struct {
	Name        string   `json:"name"`
	Title       string   `json:"title"`
	Seeds       []string `json:"seeds"`
	Description string   `json:"description"`
	Skipped     bool     `json:"skipped,omitempty"` // the whole scenario could not run
	SkipReason  string   `json:"skip_reason,omitempty"`
	Default     string   `json:"default"` // ID of the row the change columns compare against
	Load        LoadInfo `json:"load"`
	DurationNs  int64    `json:"duration_ns"` // measuring time, all rows together
	SliceNs     int64    `json:"slice_ns"`    // one interleaving slice
	Rounds      int      `json:"rounds"`
	Rows        []Row    `json:"rows"`
	Verdict     Verdict  `json:"verdict"`
	Notes       []string `json:"notes,omitempty"` // footnotes of the table
	Plot        string   `json:"plot,omitempty"`  // file name of the CDF plot, relative to the output directory

	// clat keeps verity's raw completion latencies by row ID for
	// WriteFio; not part of the JSON document.
	clat map[string]*stats.Samples
}

// LoadInfo describes the antagonist load during a scenario's measurement.
type LoadInfo struct {
	Antagonist string  `json:"antagonist"`      // e.g. "8 burners at 90% (qsort)", "none"
	ProcCPUs   float64 `json:"antagonist_cpus"` // CPUs the antagonist processes kept busy (CPU time / wall)
	// AskedCPUs is the CPU time the antagonist asked for, in CPUs (8
	// burners at 90%: 7.2), on OnCPUs CPUs; 0 when unknown. ProcCPUs is
	// what it got.
	AskedCPUs  float64   `json:"antagonist_asked_cpus,omitempty"`
	OnCPUs     int       `json:"antagonist_on_cpus,omitempty"`
	PerCPU     []CPUBusy `json:"per_cpu,omitempty"`    // utilisation of each CPU (all processes)
	AllPct     float64   `json:"all_pct"`              // utilisation of all CPUs together, %
	Note       string    `json:"note,omitempty"`       // e.g. a fallback that was taken
	WallNs     int64     `json:"wall_ns"`              // interval the load was measured over
	Error      string    `json:"error,omitempty"`      // why the load could not be measured
	HogCPU     *int      `json:"hog_cpu,omitempty"`    // delayed scenario: the hogged CPU
	HogNice    *int      `json:"hog_nice,omitempty"`   // delayed scenario: the hog's nice value
	Queuer     string    `json:"queuer,omitempty"`     // delayed scenario: how the queueing thread ran
	Readers    int       `json:"readers,omitempty"`    // erofs/verity: reader goroutines
	PeriodNs   int64     `json:"period_ns,omitempty"`  // submit: submitter period
	DelayNs    int64     `json:"delay_ns,omitempty"`   // delayed: timer delay
	DirectIO   *bool     `json:"direct_io,omitempty"`  // verity: O_DIRECT reads
	DataBytes  int64     `json:"data_bytes,omitempty"` // verity: image size; erofs: raw corpus size
	DataSource string    `json:"data_source,omitempty"`
	// throughput: sparse items per row (PeriodNs apart), back-to-back
	// items per row, and the ring of work items they go through.
	SparseItems     int `json:"sparse_items,omitempty"`
	ThroughputItems int `json:"throughput_items,omitempty"`
	Ring            int `json:"ring,omitempty"`
}

// CPUBusy is the utilisation of one CPU in percent.
type CPUBusy struct {
	CPU     int     `json:"cpu"`
	BusyPct float64 `json:"busy_pct"`
}

// Row is one configuration's measurement.
type Row struct {
	ID         string `json:"id"`    // configuration ID, e.g. "rt-percpu"
	Label      string `json:"label"` // e.g. "RT per-CPU"
	Note       string `json:"note,omitempty"`
	Kind       Kind   `json:"kind"`
	Class      Class  `json:"class"`
	Flags      string `json:"flags,omitempty"` // workqueue flags, e.g. "PERCPU|RT"
	Batch      int    `json:"batch,omitempty"` // throughput: items per QueueBatch call, 0 unbatched
	Skipped    bool   `json:"skipped,omitempty"`
	SkipReason string `json:"skip_reason,omitempty"`
	// RanAt is the scheduling class the row's work functions ran at, read
	// back (/proc/<pid>/task/<tid>/stat) from the threads that ran probe
	// items before and after the measurement, e.g. "nice 0", "nice -20",
	// "FIFO 1"; several, comma-separated, when they differed; "" when it
	// could not be read. It is what ran, not what was asked for: under
	// `nice -n 19` without privilege the normal rows run at nice 19.
	RanAt string `json:"ran_at,omitempty"`
	// Items is the number of work items measured.
	Items int64 `json:"items"`
	// QueueToStart is the scheduling latency: from just before the
	// queue call to the first instruction of the work function (for
	// delayed work, minus the requested delay), in us.
	QueueToStart Latency `json:"queue_to_start"`
	// Clat is verity's completion latency (read + verify round trip), us.
	Clat *Latency `json:"clat,omitempty"`
	// ClatCDF is the distribution of Clat at the fractions of CDF
	// (verity only), enough to redraw its plot.
	ClatCDF []CDFPoint `json:"clat_cdf,omitempty"`
	// BandwidthMiBs is verity's read bandwidth in MiB/s.
	BandwidthMiBs float64 `json:"bandwidth_mib_s,omitempty"`
	// Missed counts submit ticks not submitted (every slot still busy, or
	// the submitter woke more than a period late), and items of the other
	// scenarios that were refused by the queue.
	Missed int64 `json:"missed,omitempty"`
	// OnQueueCPUPct is, for the delayed scenario, the share of items that
	// ran on the CPU they were queued from (the hogged one), in %.
	OnQueueCPUPct *float64 `json:"on_queue_cpu_pct,omitempty"`
	// Change holds the change against the default row in %, by metric
	// key ("avg", "max", "p98", "clat_avg", "bw", ...).
	Change map[string]float64 `json:"change_pct,omitempty"`
	// CDF is the distribution of QueueToStart at fixed fractions (every
	// 1% to 90%, then finer into the tail: 99.9%, 99.99%, 1), enough to
	// redraw the plot.
	CDF []CDFPoint `json:"cdf,omitempty"`
	// Errors counts workload errors (a failed read, a verification or
	// decompression mismatch); Error is the first one.
	Errors int64  `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
	// MeasuredNs is the time spent measuring this row (sum of its slices).
	MeasuredNs int64 `json:"measured_ns"`
	// Throughput is the throughput scenario's back-to-back phase; there,
	// Items and QueueToStart are the sparse (idle) items.
	Throughput *BackToBack `json:"throughput,omitempty"`
}

// BackToBack is one row's back-to-back figures: empty items queued by one
// producer as fast as it can.
type BackToBack struct {
	Items           int64   `json:"items"`             // items run back to back
	ItemsPerSec     float64 `json:"items_per_s"`       // first Queue to the last item's run
	AllocsPerItem   float64 `json:"allocs_per_item"`   // runtime.MemStats Mallocs delta / Items (the whole process)
	CPUSecPerMItems float64 `json:"cpu_s_per_m_items"` // getrusage(RUSAGE_SELF) user+system, CPU seconds per million items
	VsAnts          float64 `json:"vs_ants,omitempty"` // ItemsPerSec over ants/v2's in the same run
	// RoundsPerSec is ItemsPerSec in each interleaving round: its spread.
	RoundsPerSec []float64 `json:"items_per_s_rounds,omitempty"`
}

// Latency is a latency summary; every value in microseconds.
type Latency struct {
	Count    int64   `json:"count"`
	MinUs    float64 `json:"min_us"`
	MedianUs float64 `json:"median_us"`
	AvgUs    float64 `json:"avg_us"`
	MaxUs    float64 `json:"max_us"`
	StdevUs  float64 `json:"stdev_us"`
	P90Us    float64 `json:"p90_us"`
	P95Us    float64 `json:"p95_us"`
	P98Us    float64 `json:"p98_us"`
	P99Us    float64 `json:"p99_us"`
	P999Us   float64 `json:"p99_9_us"`
	Exact    bool    `json:"exact"` // percentiles from every sample (else HdrHistogram, within 0.1%)
}

// CDFPoint is one point of a cumulative distribution: Frac of the samples
// are at or below Us microseconds.
type CDFPoint struct {
	Us   float64 `json:"us"`
	Frac float64 `json:"frac"`
}

// Verdict answers, for one table, whether gowq's RT class beat every Go
// baseline and the normal class on the table's metric.
type Verdict struct {
	Metric  string `json:"metric"`          // e.g. "p99 queue->start (us)"
	Decided bool   `json:"decided"`         // false when an RT row or every opponent was missing
	RTWins  bool   `json:"rt_wins"`         // RT beat every baseline and normal-class row
	BestRT  string `json:"best_rt"`         // ID of the best RT row
	Loser   string `json:"loser,omitempty"` // ID of the best opponent, or the first one RT did not beat
	Text    string `json:"text"`            // the line printed under the table: short, the whole run and whether every round agrees
	// Detail is the figures behind Text's margin: the metric of both
	// rows, or each goal's ratio, in every round; "" when there is none.
	Detail string `json:"detail,omitempty"`
	// Ratio is the whole run's margin: the best opponent's metric over
	// the best RT row's (the other way round for a higher-is-better
	// metric), so above 1 means RT is better. RoundRatios is the same
	// ratio in each interleaving round, with the best opponent of that
	// round; RatioMin and RatioMax are their range. A verdict is decided
	// only when every round agrees with the whole run (the margin clears
	// the spread); otherwise Decided is false and Text says "not
	// decided". The throughput scenario gives its spread per row in Text.
	Ratio       float64   `json:"ratio,omitempty"`
	RoundRatios []float64 `json:"round_ratios,omitempty"`
	RatioMin    float64   `json:"ratio_min,omitempty"`
	RatioMax    float64   `json:"ratio_max,omitempty"`
	// Indicative is set for a --quick run: too few rounds to trust.
	Indicative bool `json:"indicative,omitempty"`
}

func latencyOf(s *stats.Samples) Latency {
	m := s.Summary()
	return Latency{
		Count: m.Count, MinUs: m.Min, MedianUs: m.Median, AvgUs: m.Avg, MaxUs: m.Max,
		StdevUs: m.Stdev, P90Us: m.P90, P95Us: m.P95, P98Us: m.P98, P99Us: m.P99, P999Us: m.P999,
		Exact: m.Exact,
	}
}

// cdfFracs are the fractions at which cdfOf samples the distribution,
// denser in the tail where the classes differ.
var cdfFracs = func() []float64 {
	var f []float64
	for i := 0; i < 90; i++ {
		f = append(f, float64(i)/100)
	}
	for i := 0; i < 18; i++ {
		f = append(f, 0.90+float64(i)*0.005)
	}
	for i := 0; i < 9; i++ {
		f = append(f, 0.99+float64(i)*0.001)
	}
	for i := 0; i < 10; i++ {
		f = append(f, 0.999+float64(i)*0.0001)
	}
	return append(f, 1)
}()

func cdfOf(s *stats.Samples) []CDFPoint {
	out := make([]CDFPoint, 0, len(cdfFracs))
	for _, f := range cdfFracs {
		us, err := s.Percentile(f * 100)
		if err != nil {
			return nil
		}
		out = append(out, CDFPoint{Us: us, Frac: f})
	}
	return out
}

// WriteJSON writes r as indented JSON. Values that JSON cannot hold (NaN,
// infinities) are never stored in a Results by Run; should a caller put
// one in, the encoder's error is returned.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("scenario: encoding results: %w", err)
	}
	return nil
}

// ReadJSON reads a results document written by WriteJSON. It returns an
// error wrapping ErrSchema when the document's schema is not
// SchemaVersion, or the decoder's error.
func ReadJSON(rd io.Reader) (*Results, error) {
	var r Results
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("scenario: decoding results: %w", err)
	}
	if r.Schema != SchemaVersion {
		return nil, fmt.Errorf("%w: schema %q (want %q)", ErrSchema, r.Schema, SchemaVersion)
	}
	return &r, nil
}

// Scenario returns the result of the named scenario, or nil.
func (r *Results) Scenario(name string) *ScenarioResult {
	for i := range r.Scenarios {
		if r.Scenarios[i].Name == name {
			return &r.Scenarios[i]
		}
	}
	return nil
}

// Row returns the row with configuration ID id, or nil.
func (s *ScenarioResult) Row(id string) *Row {
	for i := range s.Rows {
		if s.Rows[i].ID == id {
			return &s.Rows[i]
		}
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
