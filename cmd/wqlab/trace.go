package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/ktrace"
	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

// traceFlags are the flags of `wqlab trace`.
type traceFlags struct {
	json       bool
	top        int
	histograms bool
	functions  bool
	workqueue  string
	function   string
	live       time.Duration
	save       string
	tracefs    string
	topLevel   bool
	fsyncLoad  time.Duration
}

func newTraceCmd(stdout, stderr io.Writer) *cobra.Command {
	var f traceFlags
	cmd := &cobra.Command{
		Use:   "trace [FILE | -]",
		Short: "Report workqueue latency from a kernel or gowq trace, or record the kernel live",
		Long: `trace reads workqueue tracepoint events (workqueue_queue_work, _activate_work,
_execute_start, _execute_end) from FILE, or from stdin with "-": the text of
/sys/kernel/tracing/trace or trace_pipe (current and older kernels' formats),
trace-cmd report or perf script output, or gowq's FtraceWriter output. Other
lines are skipped and counted. It pairs the events per work item and prints,
per workqueue and per (workqueue, function): count, queued, and the
queue->activate, activate->start, queue->start (the scheduling latency) and
execution times in microseconds (min, p50, p90, p99, p99.9, max, avg, stdev),
plus with --histograms a log2 histogram of queue->start per workqueue.

With --live DURATION it records the running kernel instead: it mounts tracefs
at /sys/kernel/tracing if needed, records the workqueue events in a private
trace instance (or, where there is none, the top-level buffer, whose files it
saves and writes back), puts tracefs back as it found it and analyses the
recording. This needs root (or CAP_SYS_ADMIN and access to tracefs).

Exit status: 0 on success, 1 when the input holds no workqueue events (or none
match the filters), cannot be read, or cannot be recorded, 2 for a usage error.`,
		Example: `  wqlab trace testdata/ktrace/fio-cpuio-8x90-plus-fsync.txt
  trace-cmd report | wqlab trace --top 5 --histograms -
  wqlab trace --workqueue '^kblockd$' --json capture.txt
  wqlab trace --live 10s --fsync-load 2ms --save kernel.txt`,
		Args:          cobra.MaximumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrace(cmd.Context(), &f, args, cmd.InOrStdin(), stdout, stderr)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.json, "json", false, "print one JSON object (parse counts and the report) instead of the tables")
	fs.IntVar(&f.top, "top", 0, "show only the N busiest workqueues and functions (0: all)")
	fs.BoolVar(&f.histograms, "histograms", false, "add a log2 histogram of queue->start per workqueue")
	fs.BoolVar(&f.functions, "functions", true, "print the per-function table")
	fs.StringVar(&f.workqueue, "workqueue", "", "analyse only work items of workqueues matching this regular expression")
	fs.StringVar(&f.function, "function", "", "analyse only work items whose function matches this regular expression")
	fs.DurationVar(&f.live, "live", 0, "record the running kernel's workqueue events for this long instead of reading FILE (needs root)")
	fs.StringVar(&f.save, "save", "", "with --live: write the raw recording (ftrace text) to this file")
	fs.StringVar(&f.tracefs, "tracefs", "", "with --live: tracefs directory (default "+ktrace.DefaultRoot+", mounted there if needed)")
	fs.BoolVar(&f.topLevel, "top-level", false, "with --live: record in the top-level buffer (saved and restored) instead of a private instance")
	fs.DurationVar(&f.fsyncLoad, "fsync-load", 0, "with --live: write and fsync a temporary file this often while recording, so the kernel queues block-I/O work (e.g. 2ms; 0: off)")
	return cmd
}

// traceInput is what was read or recorded, before analysis.
type traceInput struct {
	name   string // file name, "stdin" or the tracefs directory
	events []wqtrace.Event
	stats  wqtrace.ParseStats
	rec    *ktrace.Recording // --live only
}

func runTrace(ctx context.Context, f *traceFlags, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// Usage errors first (exit 2), before anything is read or recorded.
	switch {
	case f.live < 0:
		return fmt.Errorf("negative --live %v", f.live)
	case f.live > 0 && len(args) > 0:
		return fmt.Errorf("give either FILE or --live, not both")
	case f.live == 0 && len(args) == 0:
		return fmt.Errorf("trace needs FILE (or - for stdin), or --live DURATION")
	case f.live == 0 && (f.save != "" || f.tracefs != "" || f.topLevel || f.fsyncLoad != 0):
		return fmt.Errorf("--save, --tracefs, --top-level and --fsync-load go with --live")
	case f.top < 0:
		return fmt.Errorf("negative --top %d", f.top)
	case f.fsyncLoad < 0:
		return fmt.Errorf("negative --fsync-load %v", f.fsyncLoad)
	}
	wqRE, err := compileFilter("--workqueue", f.workqueue)
	if err != nil {
		return err
	}
	fnRE, err := compileFilter("--function", f.function)
	if err != nil {
		return err
	}

	var in *traceInput
	var tail error // a failure to report after the analysis (exit 1)
	if f.live > 0 {
		in, tail, err = recordLive(ctx, f, stderr)
	} else {
		in, err = readTrace(args[0], stdin)
	}
	if err != nil {
		return &runFailure{err}
	}
	if in.stats.Malformed > 0 {
		fmt.Fprintf(stderr, "wqlab trace: warning: %d malformed workqueue line(s) skipped; the first: %v\n",
			in.stats.Malformed, in.stats.FirstMalformed)
	}
	if len(in.events) == 0 {
		return &runFailure{errors.Join(fmt.Errorf("no workqueue events in %s (%s)", in.name, parseLine(in.stats)), tail)}
	}
	events := filterEvents(in.events, wqRE, fnRE)
	if len(events) == 0 {
		return &runFailure{errors.Join(fmt.Errorf("no work items in %s match%s", in.name, filterText(f)), tail)}
	}
	rep := analyze.Analyze(events)
	if f.json {
		err = writeTraceJSON(stdout, f, in, rep)
	} else {
		err = writeTraceText(stdout, f, in, rep)
	}
	if err != nil {
		return &runFailure{err}
	}
	if tail != nil {
		return &runFailure{tail}
	}
	return nil
}

func compileFilter(flag, expr string) (*regexp.Regexp, error) {
	if expr == "" {
		return nil, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return re, nil
}

// readTrace parses a file, or stdin for "-".
func readTrace(name string, stdin io.Reader) (*traceInput, error) {
	in := &traceInput{name: name}
	r := stdin
	if name == "-" {
		in.name = "stdin"
	} else {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	p := wqtrace.NewParser(r)
	for p.Next() {
		in.events = append(in.events, p.Event())
	}
	in.stats = p.Stats()
	if err := p.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", in.name, err)
	}
	return in, nil
}

// recordLive records the kernel through tracefs. It returns the input;
// tail, a failure to report once the recording has been analysed (an
// interruption, state that could not be restored, a --save error); and
// err, a failure that left nothing to analyse.
func recordLive(ctx context.Context, f *traceFlags, stderr io.Writer) (in *traceInput, tail, err error) {
	root := f.tracefs
	if root == "" {
		root = ktrace.DefaultRoot
	}
	var load *ktrace.FsyncLoad
	if f.fsyncLoad > 0 {
		l, err := ktrace.StartFsyncLoad("", f.fsyncLoad)
		if err != nil {
			return nil, nil, err
		}
		load = l
	}
	fmt.Fprintf(stderr, "wqlab trace: recording the kernel's workqueue events for %v (%s)...\n", f.live, root)
	rec, err := ktrace.Record(ctx, ktrace.Config{Root: f.tracefs, TopLevel: f.topLevel}, f.live)
	var tails []error
	if load != nil {
		n, lerr := load.Stop()
		fmt.Fprintf(stderr, "wqlab trace: fsync load: %d write+fsync of %s\n", n, load.Path())
		tails = append(tails, lerr)
	}
	if rec == nil {
		return nil, nil, errors.Join(append([]error{err}, tails...)...)
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(stderr, "wqlab trace: interrupted after %v; analysing what was recorded\n", rec.Duration.Round(time.Millisecond))
		tails = append(tails, fmt.Errorf("interrupted: %w", err))
	case err != nil:
		fmt.Fprintf(stderr, "wqlab trace: warning: %v\n", err)
		tails = append(tails, err)
	}
	for _, n := range rec.Notes {
		fmt.Fprintf(stderr, "wqlab trace: note: %s\n", n)
	}
	if f.save != "" {
		if err := os.WriteFile(f.save, rec.Raw, 0o644); err != nil {
			tails = append(tails, fmt.Errorf("--save: %w", err))
		} else {
			fmt.Fprintf(stderr, "wqlab trace: raw recording (%d bytes) written to %s\n", len(rec.Raw), f.save)
		}
	}
	name := rec.Root
	if rec.Instance != "" {
		name += " (instance " + rec.Instance + ")"
	}
	return &traceInput{name: name, events: rec.Events, stats: rec.Stats, rec: rec}, errors.Join(tails...), nil
}

// filterEvents keeps the events of work items whose workqueue matches wq
// and whose function matches fn (nil matches all). Only queue_work names
// the workqueue, so each event is attributed as package analyze pairs
// them: activate and execute_start to the pending queue_work of their
// work address, execute_end to the execute_start of the same address and
// thread. Events whose workqueue cannot be known (queued before the
// capture) are dropped by a workqueue filter.
func filterEvents(evs []wqtrace.Event, wq, fn *regexp.Regexp) []wqtrace.Event {
	if wq == nil && fn == nil {
		return evs
	}
	type attr struct {
		wq, fn string
		known  bool
	}
	type runKey struct {
		work uintptr
		tid  int
	}
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch ta, tb := evs[a].TimeNs, evs[b].TimeNs; {
		case ta < tb:
			return -1
		case ta > tb:
			return 1
		}
		return 0
	})
	pending := map[uintptr]attr{}
	running := map[runKey]attr{}
	keep := make([]bool, len(evs))
	for _, i := range idx {
		ev := &evs[i]
		var a attr
		switch ev.Kind {
		case wqtrace.QueueWork:
			a = attr{ev.Workqueue, ev.Function, true}
			pending[ev.Work] = a
		case wqtrace.ActivateWork:
			a = pending[ev.Work]
		case wqtrace.ExecuteStart:
			a = pending[ev.Work]
			delete(pending, ev.Work)
			running[runKey{ev.Work, ev.TID}] = a
		case wqtrace.ExecuteEnd:
			k := runKey{ev.Work, ev.TID}
			a = running[k]
			delete(running, k)
		default:
			continue
		}
		ok := true
		if wq != nil {
			ok = a.known && wq.MatchString(a.wq)
		}
		if ok && fn != nil {
			name := ev.Function
			if name == "" {
				name = a.fn
			}
			ok = fn.MatchString(name)
		}
		keep[i] = ok
	}
	var out []wqtrace.Event
	for i := range evs {
		if keep[i] {
			out = append(out, evs[i])
		}
	}
	return out
}

func filterText(f *traceFlags) string {
	s := ""
	if f.workqueue != "" {
		s += fmt.Sprintf(" --workqueue %q", f.workqueue)
	}
	if f.function != "" {
		s += fmt.Sprintf(" --function %q", f.function)
	}
	return s
}

// parseLine summarises the parser's counts.
func parseLine(st wqtrace.ParseStats) string {
	s := fmt.Sprintf("%d lines, %d workqueue events, %d skipped (%d blank or comment, %d other), %d malformed",
		st.Lines, st.Events, st.Comments+st.Other, st.Comments, st.Other, st.Malformed)
	if st.Lost > 0 {
		s += fmt.Sprintf(", %d lost by the kernel's ring buffer", st.Lost)
	}
	return s
}

func writeTraceText(w io.Writer, f *traceFlags, in *traceInput, rep *analyze.Report) error {
	var b bytes.Buffer
	if in.rec != nil {
		fmt.Fprintf(&b, "recorded: %s, %v\n", in.name, in.rec.Duration.Round(time.Millisecond))
		fmt.Fprintf(&b, "parsed: %s\n", parseLine(in.stats))
	} else {
		fmt.Fprintf(&b, "parsed %s: %s\n", in.name, parseLine(in.stats))
	}
	if ft := filterText(f); ft != "" {
		fmt.Fprintf(&b, "filter:%s (%d of %d events)\n", ft, rep.Events, len(in.events))
	}
	if err := rep.WriteText(&b, analyze.TextOptions{Top: f.top, HideFunctions: !f.functions, Histograms: f.histograms}); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// traceDoc is the JSON document of `wqlab trace --json`.
type traceDoc struct {
	Source string     `json:"source"` // file name, "stdin", or the tracefs directory
	Live   *liveDoc   `json:"live,omitempty"`
	Parse  parseDoc   `json:"parse"`
	Filter *filterDoc `json:"filter,omitempty"`
	// Report is package analyze's report (durations in us); with --top,
	// its workqueues and functions are cut to the N busiest.
	Report *analyze.Report `json:"report"`
}

type liveDoc struct {
	DurationNs int64    `json:"duration_ns"`
	Instance   string   `json:"instance,omitempty"`
	Mounted    bool     `json:"mounted"`
	Notes      []string `json:"notes,omitempty"`
}

type parseDoc struct {
	Lines          int    `json:"lines"`
	Events         int    `json:"events"`
	Comments       int    `json:"comments"`
	Other          int    `json:"other"`
	Malformed      int    `json:"malformed"`
	Lost           int64  `json:"lost"`
	FirstMalformed string `json:"first_malformed,omitempty"`
}

type filterDoc struct {
	Workqueue string `json:"workqueue,omitempty"`
	Function  string `json:"function,omitempty"`
	Events    int    `json:"events"` // events kept
}

func writeTraceJSON(w io.Writer, f *traceFlags, in *traceInput, rep *analyze.Report) error {
	st := in.stats
	doc := traceDoc{
		Source: in.name,
		Parse: parseDoc{Lines: st.Lines, Events: st.Events, Comments: st.Comments, Other: st.Other,
			Malformed: st.Malformed, Lost: st.Lost},
		Report: rep,
	}
	if st.FirstMalformed != nil {
		doc.Parse.FirstMalformed = st.FirstMalformed.Error()
	}
	if in.rec != nil {
		doc.Live = &liveDoc{DurationNs: int64(in.rec.Duration), Instance: in.rec.Instance, Mounted: in.rec.Mounted, Notes: in.rec.Notes}
	}
	if f.workqueue != "" || f.function != "" {
		doc.Filter = &filterDoc{Workqueue: f.workqueue, Function: f.function, Events: rep.Events}
	}
	if f.top > 0 {
		cut := *rep
		cut.Workqueues = cut.Workqueues[:min(f.top, len(cut.Workqueues))]
		cut.Functions = cut.Functions[:min(f.top, len(cut.Functions))]
		doc.Report = &cut
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}
