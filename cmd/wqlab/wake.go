package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/wake"
)

// newWakeCmd is `wqlab wake`: queue-to-start latency of every gowq class
// against the raw futex wake-up probe, under a chosen load.
func newWakeCmd(stdout, stderr io.Writer) *cobra.Command {
	var load string
	var samples int
	var gap time.Duration
	var asJSON bool
	var queuer string
	var goLoad, wqLoad int
	var only []string
	var noPWait bool
	var ef explainFlags
	cmd := &cobra.Command{
		Use:   "wake",
		Short: "Measure each worker class's wake-up latency against the raw futex probe and the Go executors, under load",
		Long: `wake measures queue-to-start latency (n, min, p50, avg, p99, max, us) of the
normal, highpri and RT classes, of the usual Go executors (go statement,
channel pool, ants/v2, pond/v2) and of the raw wake-up probe (two C threads
handing a token through a futex, no Go scheduler in the path: the physical
limit), interleaved under the same load (the lab driver's, as the scenarios):
  --load hogs     one nice -20 CPU hog pinned to each CPU (default)
  --load burners  8 cpuio qsort burners at 90% (the seeds' fio job)
  --load none     idle machine
  --queuer fifo   the queuing thread (and the probe's waker) is SCHED_FIFO
  --go-load N     N goroutines of wqlab itself spin, so that every P is busy
  --wq-load N     N CPU-bound 2 ms items always in flight on a default queue
                  of wqlab itself (gowq's own goroutines), with its goal: the
                  best RT row's p99 within 3x of the raw SCHED_FIFO probe's
and checks the targets: RT p99 within 2x of the probe's SCHED_FIFO p99, the
normal class's p99 at least 10x RT's, and the best RT row's max within 10x
(3x with --queuer fifo) of the probe's max.

  --explain       attribute every outlier (above --explain-threshold, or
                  max(100us, 10x the raw probe's max)) to a likely cause:
                  GC STW, queuer preempted, scheduler (run-queue wait of the
                  worker thread), lock wait, P wait or unknown (kernel
                  wake-up); prints up to 20 outliers per row and a count per
                  cause per row. It reads /proc and getrusage around each
                  sample and runs the runtime tracer (for the exact
                  stop-the-world ranges); off, nothing extra is collected.
  --gogc N|off    GC percent for the run (debug.SetGCPercent)
  --mlock         mlockall the process first (labsys.Mlockall)
  --gc-load MiB/s in-process allocation load, so that GC cycles happen`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := wakeOptions(load, queuer, samples, goLoad, gap, only)
			if err != nil {
				return err
			}
			if wqLoad < 0 || wqLoad > driver.MaxWQLoad {
				return fmt.Errorf("--wq-load %d: want 0..%d", wqLoad, driver.MaxWQLoad)
			}
			o.WQLoad = wqLoad
			if err := ef.apply(&o); err != nil {
				return err
			}
			// The P-wait stamp is on by default in every program; off, a
			// run shows its cost on the wake-up (the same process-wide
			// switch a program has: labsys.SetPWaitAccounting).
			labsys.SetPWaitAccounting(!noPWait)
			defer labsys.SetPWaitAccounting(true)
			rows := len(only)
			if rows == 0 {
				rows = len(wake.Configs())
			}
			fmt.Fprintf(stderr, "wake: measuring %d samples of %d configurations under load %q, queuer %s, go-load %d, wq-load %d, gc-load %d MiB/s, explain %v...\n",
				samples, rows, load, o.Queuer, goLoad, wqLoad, o.GCLoad, o.Explain)
			return runExperiment(cmd.Context(), wake.Experiment(o), asJSON, "", stdout)
		},
	}
	cmd.Flags().StringVar(&load, "load", "hogs", "antagonist: hogs, burners or none")
	cmd.Flags().IntVar(&samples, "samples", wake.DefaultSamples, "samples per configuration (1..1000000)")
	cmd.Flags().StringVar(&queuer, "queuer", "other", "class of the queuing thread and of the probe's waker: other (SCHED_OTHER) or fifo (SCHED_FIFO)")
	cmd.Flags().IntVar(&goLoad, "go-load", 0, "goroutines of wqlab itself that spin during the run, keeping every P busy (0..1024)")
	cmd.Flags().IntVar(&wqLoad, "wq-load", 0, fmt.Sprintf("CPU-bound 2 ms items kept in flight on a default queue of wqlab itself during the run (0..%d)", driver.MaxWQLoad))
	cmd.Flags().StringSliceVar(&only, "configs", nil, "rows to measure, comma-separated names (default all): "+strings.Join(wake.Configs(), ", "))
	cmd.Flags().DurationVar(&gap, "gap", 200*time.Microsecond, "pause between two samples")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	cmd.Flags().BoolVar(&noPWait, "no-pwait", false, "turn off the P-wait stamp of worker wake-ups (Stats().PWait stops growing), to measure its cost")
	ef.register(cmd.Flags())
	return cmd
}

// explainFlags are the outlier-attribution and GC flags of `wqlab wake`.
type explainFlags struct {
	explain   bool
	threshold time.Duration
	gogc      string
	mlock     bool
	gcLoad    int
}

func (f *explainFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.explain, "explain", false, "attribute every outlier to a likely cause (GC STW, queuer preempted, scheduler, lock wait, P wait, unknown)")
	fs.DurationVar(&f.threshold, "explain-threshold", 0, "outlier threshold for --explain (default max(100us, 10x the raw probe's max))")
	fs.StringVar(&f.gogc, "gogc", "", "GC percent during the run (debug.SetGCPercent): a number >= 0 or off (default: leave as is)")
	fs.BoolVar(&f.mlock, "mlock", false, "lock the process's memory first (mlockall(MCL_CURRENT|MCL_FUTURE); needs CAP_IPC_LOCK or RLIMIT_MEMLOCK)")
	fs.IntVar(&f.gcLoad, "gc-load", 0, fmt.Sprintf("MiB/s of garbage allocated by wqlab itself during the run, so that GC cycles happen (0..%d)", wake.MaxGCLoad))
}

// apply checks the flags and sets them in o; an error names the flag and
// the values it accepts.
func (f *explainFlags) apply(o *wake.Options) error {
	if f.threshold < 0 {
		return fmt.Errorf("--explain-threshold %v: must not be negative", f.threshold)
	}
	if f.threshold > 0 && !f.explain {
		return fmt.Errorf("--explain-threshold needs --explain")
	}
	if f.gcLoad < 0 || f.gcLoad > wake.MaxGCLoad {
		return fmt.Errorf("--gc-load %d: want 0..%d MiB/s", f.gcLoad, wake.MaxGCLoad)
	}
	switch s := strings.TrimSpace(f.gogc); s {
	case "":
	case "off":
		v := -1
		o.GOGC = &v
	default:
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return fmt.Errorf("--gogc %q: want a number >= 0 or off", f.gogc)
		}
		o.GOGC = &v
	}
	o.Explain, o.ExplainThreshold, o.Mlock, o.GCLoad = f.explain, f.threshold, f.mlock, f.gcLoad
	return o.Validate()
}

// wakeOptions checks the flags of `wqlab wake` and returns the options;
// an error names the flag and the values it accepts.
func wakeOptions(load, queuer string, samples, goLoad int, gap time.Duration, only []string) (wake.Options, error) {
	if samples < 1 || samples > wake.MaxSamples {
		return wake.Options{}, fmt.Errorf("--samples %d: want 1..%d", samples, wake.MaxSamples)
	}
	if gap < 0 {
		return wake.Options{}, fmt.Errorf("--gap %v: must not be negative", gap)
	}
	switch wake.Load(load) {
	case wake.LoadHogs, wake.LoadBurners, wake.LoadNone:
	default:
		return wake.Options{}, fmt.Errorf("--load %q: want hogs, burners or none", load)
	}
	switch wake.Queuer(queuer) {
	case wake.QueuerOther, wake.QueuerFIFO:
	default:
		return wake.Options{}, fmt.Errorf("--queuer %q: want other or fifo", queuer)
	}
	if goLoad < 0 || goLoad > wake.MaxGoLoad {
		return wake.Options{}, fmt.Errorf("--go-load %d: want 0..%d", goLoad, wake.MaxGoLoad)
	}
	var names []string
	for _, s := range only {
		if s = strings.TrimSpace(s); s != "" {
			names = append(names, s)
		}
	}
	o := wake.Options{Load: wake.Load(load), Samples: samples, Gap: gap, Queuer: wake.Queuer(queuer), GoLoad: goLoad, Configs: names}
	if err := o.Validate(); err != nil {
		return wake.Options{}, fmt.Errorf("--configs: %w", err)
	}
	return o, nil
}
