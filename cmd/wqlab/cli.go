package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gowq/wq/lab/doctor"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/e2e"
	"github.com/gowq/wq/lab/scenario"
)

// Exit codes.
const (
	exitOK    = 0
	exitFail  = 1 // the run failed or was interrupted
	exitUsage = 2 // bad flags or arguments
)

// runFailure marks an error of the run itself (exit 1); every other
// error from the command line is a usage error (exit 2).
type runFailure struct{ err error }

func (e *runFailure) Error() string { return e.err.Error() }
func (e *runFailure) Unwrap() error { return e.err }

// runFlags are the flags of the root command and of `run`.
type runFlags struct {
	quick      bool
	scenarios  []string
	duration   time.Duration
	configs    []string
	json       bool
	out        string
	antagonist string
	verityMiB  int64
	verityDir  string
	erofsSrc   string
	plotFormat string
	noProgress bool
	list       bool
	kernel     bool
	tputLoad   bool
}

func (f *runFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.quick, "quick", false, "smoke run: ~15 s in all (2.5 s per scenario, 8 MiB verity image, 4 MiB erofs corpus)")
	fs.StringSliceVarP(&f.scenarios, "scenario", "s", nil,
		"scenarios to run, comma-separated: "+strings.Join(scenario.Names(), ", ")+" (default all of these); or "+
			scenario.Blocking+" alone (bursts of blocking items, not in the default suite); or e2e or e2e-seq alone "+
			"(fio through go-fuse and the kernel's EROFS, root, ~1.5 min)")
	fs.DurationVarP(&f.duration, "duration", "d", 0,
		fmt.Sprintf("measuring time per scenario, shared by its configurations (default %v, --quick %v)",
			scenario.DefaultDuration, scenario.QuickDuration))
	fs.StringSliceVarP(&f.configs, "configs", "c", nil,
		"configurations to measure, comma-separated IDs or groups ("+strings.Join(scenario.ConfigGroups(), ", ")+"); see --list (default all)")
	fs.BoolVar(&f.json, "json", false, "print the results JSON (blocking: its own document) on stdout instead of the tables")
	fs.StringVarP(&f.out, "out", "o", "wqlab-results", `directory for index.html (the report), results.json, results.txt and plots; with --scenario blocking, blocking.json and blocking.txt ("" writes nothing)`)
	fs.StringVar(&f.antagonist, "antagonist", scenario.AntagonistCPUIO,
		"CPU load: cpuio (8 fio-equivalent burners at 90%), fio (the real fio, if installed), none")
	fs.Int64Var(&f.verityMiB, "verity-mib", 0, "verity data size in MiB (default 64, --quick 8)")
	fs.StringVar(&f.verityDir, "verity-dir", "", "directory of the cached verity image (default ~/.cache/gowq/verity)")
	fs.StringVar(&f.erofsSrc, "erofs-src", "", "source tree of the erofs corpus (default $GOROOT/src)")
	fs.StringVar(&f.plotFormat, "plot-format", "svg", "plot file format: svg, png or pdf")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bars (they are off anyway when stderr is not a terminal)")
	fs.BoolVar(&f.list, "list", false, "list the scenarios and their configurations, then exit")
	fs.BoolVar(&f.tputLoad, "throughput-load", false, "run the throughput table under the --antagonist load too (by default it runs with none)")
	fs.BoolVar(&f.kernel, "kernel", false, "also record the kernel's own kworkers through tracefs (needs root) and show the busiest workqueues as rows")
}

func (f *runFlags) options() (scenario.Options, error) {
	if f.verityMiB < 0 {
		return scenario.Options{}, fmt.Errorf("%w: negative --verity-mib %d", scenario.ErrInvalidOption, f.verityMiB)
	}
	switch f.plotFormat {
	case "svg", "png", "pdf":
	default:
		return scenario.Options{}, fmt.Errorf("%w: --plot-format %q (want svg, png or pdf)", scenario.ErrInvalidOption, f.plotFormat)
	}
	o := scenario.Options{
		Scenarios:   f.scenarios,
		Configs:     f.configs,
		Duration:    f.duration,
		Quick:       f.quick,
		Antagonist:  f.antagonist,
		VeritySize:  f.verityMiB << 20,
		VerityDir:   f.verityDir,
		ErofsSource: f.erofsSrc,
		Kernel:      f.kernel,

		ThroughputLoad: f.tputLoad,
	}
	return o, o.Validate()
}

// execute runs wqlab with args and returns the exit status. It is main
// without os.Exit, so that tests can run it in-process.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "wqlab: %v\n", err)
	var rf *runFailure
	if errors.As(err, &rf) {
		return exitFail
	}
	fmt.Fprintf(stderr, "Run 'wqlab --help' for usage.\n")
	return exitUsage
}

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	var rootFlags, runCmdFlags runFlags
	root := &cobra.Command{
		Use:   "wqlab",
		Short: "Measure which worker class latency-critical work should use on this machine",
		Long: `wqlab runs the gowq lab: four scenarios from the kernel mailing-list threads
behind gowq's worker classes, each measuring every gowq class (normal, highpri,
RT; per-CPU and unbound) against the usual Go executors (go statement, channel
pool, ants/v2, pond/v2) under the same CPU load, interleaved in short slices so
that drift in the machine's load affects every row alike; and a throughput
table (idle wake-up, empty items/s, allocations and CPU per item, against
ants/v2) with no antagonist (the table says whether the machine was idle).

With no subcommand it runs the default suite (about 2 minutes; --quick: 15 s).
Latency is queue->start: from just before the queue call to the first
instruction of the work function, in microseconds (monotonic clock).

` + wrapText(scenario.SeedsExplained+" 'wqlab --list' prints which scenario reproduces which seed.", 80),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSuite(cmd.Context(), &rootFlags, stdout, stderr)
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	rootFlags.register(root.Flags())

	run := &cobra.Command{
		Use:           "run",
		Short:         "Run the scenarios (the default when no subcommand is given)",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSuite(cmd.Context(), &runCmdFlags, stdout, stderr)
		},
	}
	runCmdFlags.register(run.Flags())
	root.AddCommand(run)
	root.AddCommand(newWakeCmd(stdout, stderr))
	root.AddCommand(newAdaptiveCmd(stdout, stderr))
	root.AddCommand(newTraceCmd(stdout, stderr))
	root.AddCommand(newDoctorCmd(stdout, stderr))
	root.AddCommand(newRoundTripCmd(stdout, stderr))
	root.AddCommand(newTWQCmd(stdout, stderr))
	root.AddCommand(newBesideCmd(stdout, stderr))
	// Later subcommands (trace, monitor) are added here with
	// root.AddCommand.
	return root
}

// runSuite runs the scenarios and prints and writes their results.
func runSuite(ctx context.Context, f *runFlags, stdout, stderr io.Writer) error {
	if f.list {
		return listCatalog(stdout)
	}
	if name := e2eScenario(f.scenarios); name != "" {
		return runE2E(ctx, name, f, stdout, stderr)
	}
	// An experiment that runs alone (the blocking bursts) takes none of
	// the suite's options, so they are not checked for it.
	if e := scenario.Experiment(scenario.Options{Scenarios: f.scenarios}); e.Name() != scenario.Suite {
		return runExperiment(ctx, e, f.json, f.out, stdout)
	}
	o, err := f.options()
	if err != nil {
		return err // usage error
	}
	var human io.Writer = stdout
	if f.json {
		human = io.Discard
	}
	var txt bytes.Buffer // results.txt: the same tables
	both := io.MultiWriter(human, &txt)

	// The doctor's one line first, so that skipped or slow RT rows have
	// their reason in view.
	dr := doctor.Run(ctx, doctorEnv)
	fmt.Fprintln(both, dr.Summary())
	m := scenario.DetectMachine()
	fmt.Fprint(both, header(m, o))
	o.Log = stderr
	defer installWarnings(stderr)()
	ui := newProgressUI(stderr, !f.noProgress && isTerminal(stderr))
	o.Progress = func(p scenario.Progress) {
		ui.update(p)
		if p.Phase == scenario.PhaseDone && p.Result != nil {
			ui.finish()
			fmt.Fprintln(both)
			p.Result.WriteSection(both)
		}
	}
	r, runErr := scenario.Experiment(o).Run(ctx)
	ui.finish()
	if r == nil {
		return &runFailure{runErr}
	}
	res := r.(*scenario.Results)
	fmt.Fprint(both, res.Summary())

	var werr error
	if f.out != "" {
		// results.txt opens with the answer, as the page does; the
		// terminal had it last, in the summary.
		top := append([]byte(res.Answer().Text+"\n\n"), txt.Bytes()...)
		werr = writeOutputs(f.out, f.plotFormat, res, top)
		if werr == nil {
			fmt.Fprintf(human, "\nresults written to %s/ (index.html, results.json, results.txt, plots)\n", f.out)
		}
	}
	if f.json {
		if err := res.WriteJSON(stdout); err != nil {
			return &runFailure{err}
		}
	}
	switch {
	case runErr != nil:
		return &runFailure{fmt.Errorf("run interrupted (%w); partial results were kept", runErr)}
	case werr != nil:
		return &runFailure{werr}
	}
	return nil
}

// runExperiment runs e the way every wqlab experiment runs: Validate
// (its error is a usage error), Run, then the table on stdout, or the
// JSON document with asJSON. With out != "" it also writes <name>.json
// and <name>.txt (the table) into the directory out.
func runExperiment(ctx context.Context, e driver.Experiment, asJSON bool, out string, stdout io.Writer) error {
	if err := e.Validate(); err != nil {
		return err
	}
	res, err := e.Run(ctx)
	if err != nil {
		return &runFailure{err: err}
	}
	if asJSON {
		if err := res.WriteJSON(stdout); err != nil {
			return &runFailure{err: err}
		}
	} else if err := res.WriteTable(stdout); err != nil {
		return &runFailure{err: err}
	}
	if out == "" {
		return nil
	}
	var txt, js bytes.Buffer
	err = errors.Join(res.WriteTable(&txt), res.WriteJSON(&js))
	if err == nil {
		err = os.MkdirAll(out, 0o755)
	}
	if err == nil {
		err = errors.Join(os.WriteFile(filepath.Join(out, e.Name()+".json"), js.Bytes(), 0o644),
			os.WriteFile(filepath.Join(out, e.Name()+".txt"), txt.Bytes(), 0o644))
	}
	if err != nil {
		return &runFailure{err: fmt.Errorf("writing %s: %w", out, err)}
	}
	if !asJSON {
		fmt.Fprintf(stdout, "\nresults written to %s/ (%s.json, %s.txt)\n", out, e.Name(), e.Name())
	}
	return nil
}

func header(m scenario.Machine, o scenario.Options) string {
	var b strings.Builder
	b.WriteString("wqlab: which worker class should latency-critical work use on this machine?\n")
	model := m.CPUModel
	if model == "" {
		model = "unknown CPU"
	}
	fmt.Fprintf(&b, "machine: %d CPUs (%s), Linux %s, %s %s, GOMAXPROCS %d\n",
		m.CPUs, model, m.Kernel, m.GoVersion, m.Arch, m.GOMAXPROCS)
	pr := m.Privileges
	fifo, nice := "yes", "yes"
	if !pr.SchedFIFO {
		fifo = "NO (RT rows will be skipped)"
	}
	if !pr.Nice20 {
		nice = "NO (highpri rows will be skipped; the hogs keep the inherited nice)"
	}
	fmt.Fprintf(&b, "privileges: uid %d; SCHED_FIFO %s; nice -20 %s\n", pr.EUID, fifo, nice)
	d := o.Duration
	if d == 0 {
		d = scenario.DefaultDuration
		if o.Quick {
			d = scenario.QuickDuration
		}
	}
	sc := strings.Join(o.Scenarios, ",")
	if sc == "" {
		sc = strings.Join(scenario.Names(), ",")
	}
	ant := o.Antagonist
	if ant == "" {
		ant = scenario.AntagonistCPUIO
	}
	fmt.Fprintf(&b, "run: scenarios %s; %v of measurement each, configurations interleaved; antagonist %s\n", sc, d, ant)
	if o.Quick {
		b.WriteString("(--quick: few rounds, so the verdicts are indicative only; run without --quick to decide)\n")
	}
	if strings.Contains(","+sc+",", ","+scenario.Throughput+",") {
		if o.ThroughputLoad {
			b.WriteString("(throughput is count-based: --duration does not apply to it; --throughput-load: it runs under the antagonist)\n")
		} else {
			b.WriteString("(throughput is count-based and runs with no antagonist: --duration and --antagonist do not apply to it, unless --throughput-load)\n")
		}
	}
	return b.String()
}

// writeOutputs writes results.json, results.txt, verity-fio.txt, one
// plot per scenario and index.html (the self-contained HTML report) into
// dir.
func writeOutputs(dir, format string, res *scenario.Results, txt []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	var errs []error
	for i := range res.Scenarios {
		s := &res.Scenarios[i]
		if s.Skipped {
			continue
		}
		name := s.Name + "-plot." + format
		if err := s.WritePlot(filepath.Join(dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("plot %s: %w", name, err))
			continue
		}
		s.Plot = name
		if s.Name == scenario.Verity {
			var fb bytes.Buffer
			if s.WriteFio(&fb) == nil {
				errs = append(errs, os.WriteFile(filepath.Join(dir, "verity-fio.txt"), fb.Bytes(), 0o644))
			}
		}
	}
	var jb bytes.Buffer
	if err := res.WriteJSON(&jb); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, os.WriteFile(filepath.Join(dir, "results.json"), jb.Bytes(), 0o644))
	}
	errs = append(errs, os.WriteFile(filepath.Join(dir, "results.txt"), txt, 0o644))
	// The page a person opens: self-contained (plots inline), so it
	// opens from disk and can be mailed or attached on its own.
	var hb bytes.Buffer
	if err := res.WriteHTML(&hb, txt); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, os.WriteFile(filepath.Join(dir, "index.html"), hb.Bytes(), 0o644))
	}
	return errors.Join(errs...)
}

func listCatalog(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSEED\tDEFAULT ROW\tCONFIGURATIONS")
	for _, in := range scenario.Catalog() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", in.Name, cmpOr(strings.Join(in.Seeds, ","), "-"), in.Default, strings.Join(in.Configs, " "))
	}
	fmt.Fprintf(tw, "%s\t-\t-\t%s\n", scenario.Blocking, "every queue class and a go statement per item; runs alone: --scenario blocking")
	fmt.Fprintf(tw, "%s\t003\t%s\t%s\n", e2e.Name, e2e.ExecInline, strings.Join(e2e.RowIDs(), " ")+"; runs alone: --scenario e2e (random) or e2e-seq")
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CONFIG\tKIND\tCLASS\tFLAGS / LABEL")
	for _, c := range scenario.Configs() {
		fl := c.Label
		if c.Kind == scenario.KindGowq {
			fl = c.Flags.String() + " (" + c.Label + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.ID, c.Kind, c.Class, fl)
	}
	fmt.Fprintf(tw, "\ngroups for --configs: %s\n", strings.Join(scenario.ConfigGroups(), ", "))
	if err := tw.Flush(); err != nil {
		return err
	}
	listSeeds(w)
	return nil
}
