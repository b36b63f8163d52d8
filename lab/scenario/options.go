package scenario

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq/lab/driver"
)

// Errors returned by this package; test with errors.Is.
var (
	// ErrInvalidOption is returned by Options.Validate and Run for an
	// unknown scenario or configuration, a negative duration, an unknown
	// antagonist, or a bad size. It wraps driver.ErrInvalidOption.
	ErrInvalidOption = driver.InvalidOption("scenario")
	// ErrSchema is returned by ReadJSON for a document that is not a wqlab
	// results document of a schema version this package reads.
	ErrSchema = errors.New("scenario: not a wqlab results document")
)

// Scenario names, in run order.
const (
	Verity  = "verity"
	Erofs   = "erofs"
	Submit  = "submit"
	Delayed = "delayed"
	// Throughput is the common-case table: idle queue->start and
	// back-to-back items/s, allocations and CPU per item, against ants/v2.
	Throughput = "throughput"
)

// Names returns the scenario names in the order Run runs them.
func Names() []string { return []string{Verity, Erofs, Submit, Delayed, Throughput} }

// Antagonist names accepted by Options.Antagonist.
const (
	AntagonistCPUIO = "cpuio" // 8 burner children equivalent to fio cpuio 8x90% qsort (default)
	AntagonistFio   = "fio"   // the real fio with the seed's job file; falls back to cpuio when fio is missing
	AntagonistNone  = "none"  // no load (for debugging; the seeds' effects need load)
)

// Default durations: the measuring time of each scenario, shared by its
// configurations.
const (
	DefaultDuration = 24 * time.Second
	QuickDuration   = 2500 * time.Millisecond
)

// Data sizes, in bytes.
const (
	DefaultVeritySize = 64 << 20
	QuickVeritySize   = 8 << 20
	DefaultErofsBytes = 32 << 20
	QuickErofsBytes   = 4 << 20
)

// Options select and shape a run. The zero value runs the default suite.
type Options struct {
	// Scenarios to run; empty means all (Names()). Items may also be
	// comma-separated lists.
	Scenarios []string
	// Configs selects rows by ID or group (see Configs and ConfigGroups);
	// empty means all. Items may be comma-separated lists. A scenario runs
	// only the selected rows it has.
	Configs []string
	// Duration is the measuring time of each scenario in total, shared by
	// its configurations in interleaved slices; 0 means DefaultDuration
	// (QuickDuration with Quick). Negative is an error.
	Duration time.Duration
	// Quick selects the smoke-test sizes: QuickDuration, an 8 MiB verity
	// image and a 4 MiB erofs corpus.
	Quick bool
	// Antagonist is the load of scenarios verity, erofs and submit:
	// AntagonistCPUIO ("" too), AntagonistFio or AntagonistNone. The
	// delayed scenario always uses its pinned hog (none with
	// AntagonistNone).
	Antagonist string
	// VeritySize is the verity data size in bytes; 0 means the default
	// (64 MiB, 8 MiB with Quick). Must be a multiple of 4096.
	VeritySize int64
	// VerityDir holds the cached verity image; "" means verity.DefaultDir().
	VerityDir string
	// ErofsSource is the tree the erofs corpus is read from; "" means
	// $GOROOT/src.
	ErofsSource string
	// ErofsBytes bounds the raw corpus size in bytes; 0 means the default
	// (32 MiB, 4 MiB with Quick).
	ErofsBytes int64
	// Progress, when not nil, is called from Run's goroutine as the run
	// advances. It must not block for long.
	Progress func(Progress)
	// Log, when not nil, receives one-line notes as the run advances
	// (preparation, antagonists, skipped rows).
	Log io.Writer
	// Kernel also records the kernel's own workqueues through tracefs
	// while each scenario measures (package lab/ktrace), with a helper
	// that writes and fsyncs a temporary file every 2 ms, and adds the
	// busiest of them as "kernel kworkers (<workqueue>)" rows (KindKernel).
	// Where tracefs cannot be used (not root, no tracefs) a note says so
	// and the rows are left out; the run goes on.
	Kernel bool
	// KernelTracefs is the tracefs directory for Kernel; "" means the
	// system's, mounted at /sys/kernel/tracing for the run when needed.
	KernelTracefs string
	// ThroughputLoad runs the throughput table under the Antagonist load
	// (the cpuio burners by default) instead of with no antagonist.
	ThroughputLoad bool
}

// Phase is the stage of a scenario a Progress reports.
type Phase string

// Phases of a scenario.
const (
	PhasePrepare Phase = "prepare" // data, queues and load are being set up
	PhaseMeasure Phase = "measure" // Done of Total slices have been measured
	PhaseDone    Phase = "done"    // the scenario finished (Result set)
)

// Progress reports how far a scenario is.
type Progress struct {
	Scenario string
	Phase    Phase
	Done     int             // slices measured so far
	Total    int             // slices in all (rounds x rows measured)
	Result   *ScenarioResult // set with PhaseDone
}

// plan is the validated, defaulted form of Options.
type plan struct {
	scenarios  []string
	filter     configFilter
	duration   time.Duration
	quick      bool
	antagonist string
	veritySize int64
	verityDir  string
	erofsSrc   string
	erofsBytes int64
	kernel     bool   // Options.Kernel
	kernelFS   string // Options.KernelTracefs
	tputLoad   bool   // Options.ThroughputLoad
}

// Validate checks the options without running anything. It returns an
// error wrapping ErrInvalidOption that names the bad value and the
// accepted ones, or nil.
func (o Options) Validate() error {
	_, err := o.plan()
	return err
}

func (o Options) plan() (*plan, error) {
	p := &plan{quick: o.Quick, verityDir: o.VerityDir, erofsSrc: o.ErofsSource, kernel: o.Kernel, kernelFS: o.KernelTracefs, tputLoad: o.ThroughputLoad}
	for _, item := range o.Scenarios {
		for _, s := range strings.Split(item, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			if !slices.Contains(Names(), s) {
				return nil, fmt.Errorf("%w: unknown scenario %q (want %s)", ErrInvalidOption, s, strings.Join(Names(), ", "))
			}
			if !slices.Contains(p.scenarios, s) {
				p.scenarios = append(p.scenarios, s)
			}
		}
	}
	if len(p.scenarios) == 0 {
		p.scenarios = Names()
	} else {
		// Run order is fixed, whatever order the user gave.
		slices.SortFunc(p.scenarios, func(a, b string) int {
			return slices.Index(Names(), a) - slices.Index(Names(), b)
		})
	}
	f, err := parseConfigs(o.Configs)
	if err != nil {
		return nil, err
	}
	p.filter = f
	if f != nil {
		found := false
		for _, s := range p.scenarios {
			for _, r := range rowsOf(s) {
				found = found || f.has(r.ID)
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: none of the configs %s is part of scenario(s) %s",
				ErrInvalidOption, strings.Join(o.Configs, ","), strings.Join(p.scenarios, ","))
		}
	}
	switch {
	case o.Duration < 0:
		return nil, fmt.Errorf("%w: negative duration %v", ErrInvalidOption, o.Duration)
	case o.Duration == 0 && o.Quick:
		p.duration = QuickDuration
	case o.Duration == 0:
		p.duration = DefaultDuration
	case o.Duration < 100*time.Millisecond:
		return nil, fmt.Errorf("%w: duration %v is too short (at least 100ms per scenario)", ErrInvalidOption, o.Duration)
	default:
		p.duration = o.Duration
	}
	switch a := strings.ToLower(strings.TrimSpace(o.Antagonist)); a {
	case "", AntagonistCPUIO:
		p.antagonist = AntagonistCPUIO
	case AntagonistFio, AntagonistNone:
		p.antagonist = a
	default:
		return nil, fmt.Errorf("%w: unknown antagonist %q (want %s, %s or %s)",
			ErrInvalidOption, o.Antagonist, AntagonistCPUIO, AntagonistFio, AntagonistNone)
	}
	switch {
	case o.VeritySize < 0 || o.VeritySize%4096 != 0:
		return nil, fmt.Errorf("%w: verity size %d is not a positive multiple of 4096", ErrInvalidOption, o.VeritySize)
	case o.VeritySize > 0:
		p.veritySize = o.VeritySize
	case o.Quick:
		p.veritySize = QuickVeritySize
	default:
		p.veritySize = DefaultVeritySize
	}
	switch {
	case o.ErofsBytes < 0:
		return nil, fmt.Errorf("%w: negative erofs corpus size %d", ErrInvalidOption, o.ErofsBytes)
	case o.ErofsBytes > 0:
		p.erofsBytes = o.ErofsBytes
	case o.Quick:
		p.erofsBytes = QuickErofsBytes
	default:
		p.erofsBytes = DefaultErofsBytes
	}
	return p, nil
}

// sliceLen returns the length of one interleaving slice and the number of
// rounds for n measured rows sharing duration d: about 8 rounds, each
// slice between 50 ms and 500 ms, at least one round.
func sliceLen(d time.Duration, n int) (time.Duration, int) {
	if n < 1 {
		n = 1
	}
	s := d / time.Duration(8*n)
	s = min(max(s, 50*time.Millisecond), 500*time.Millisecond)
	rounds := int(d / (s * time.Duration(n)))
	return s, max(rounds, 1)
}
