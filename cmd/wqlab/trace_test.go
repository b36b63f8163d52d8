package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/gowq/wq/internal/testutil"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gowq/wq/lab/scenario"
	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

const (
	fioCapture  = "../../testdata/ktrace/fio-cpuio-8x90-plus-fsync.txt"
	idleCapture = "../../testdata/ktrace/idle-plus-fsync.txt"
)

// runIn runs wqlab with stdin, as execute does.
func runIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	root := newRootCmd(&o, &e)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	var rf *runFailure
	switch {
	case err == nil:
		code = exitOK
	case errors.As(err, &rf):
		code = exitFail
	default:
		code = exitUsage
	}
	if err != nil {
		e.WriteString("wqlab: " + err.Error() + "\n")
	}
	return code, o.String(), e.String()
}

// traceDocOf runs `wqlab trace --json args...` and decodes the document.
func traceDocOf(t *testing.T, args ...string) traceDoc {
	t.Helper()
	code, stdout, stderr := run(t, append([]string{"trace", "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	var doc traceDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v: stdout is not one JSON document: %v\n%s", args, err, stdout)
	}
	return doc
}

// rowOf returns the whitespace-separated fields of the first table line
// that starts with name.
func rowOf(out, name string) []string {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == name {
			return f
		}
	}
	return nil
}

func TestTraceFioCapture(t *testing.T) {
	code, stdout, stderr := run(t, "trace", fioCapture)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"parsed " + fioCapture + ": 2866 lines, 2854 workqueue events, 12 skipped (12 blank or comment, 0 other), 0 malformed",
		"per workqueue (us)", "per function (us)", "kblockd/blk_mq_run_work_fn",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	// kblockd: 399 items, queue->start min 2, p50 8, max 70 us.
	if f := rowOf(stdout, "kblockd"); len(f) < 12 || f[1] != "399" || f[3] != "queue->start" || f[4] != "2.0" || f[5] != "8.0" || f[9] != "70.0" {
		t.Errorf("kblockd row: %q", f)
	}
	if f := rowOf(stdout, "ext4-rsv-conversion"); len(f) < 2 || f[1] != "199" {
		t.Errorf("ext4-rsv-conversion row: %q", f)
	}
}

func TestTraceTopAndHistograms(t *testing.T) {
	code, stdout, _ := run(t, "trace", "--top", "2", "--histograms", "--functions=false", idleCapture)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(stdout, "per function") {
		t.Error("--functions=false still prints the function table")
	}
	if n := strings.Count(stdout, "usecs"); n != 3 { // (all) and the top 2
		t.Errorf("%d histograms, want 3:\n%s", n, stdout)
	}
	if n := strings.Count(stdout, "queue->activate"); n != 3 {
		t.Errorf("%d groups in the table, want (all) + 2:\n%s", n, stdout)
	}
}

func TestTraceJSONAndFilters(t *testing.T) {
	all := traceDocOf(t, fioCapture)
	if all.Parse.Events != 2854 || all.Parse.Lines != 2866 || all.Report.Total.Count != 713 || all.Filter != nil {
		t.Fatalf("document: parse %+v, %d items", all.Parse, all.Report.Total.Count)
	}
	if len(all.Report.Workqueues) != 10 || all.Report.Workqueues[0].Workqueue != "kblockd" {
		t.Fatalf("workqueues: %d, first %q", len(all.Report.Workqueues), all.Report.Workqueues[0].Workqueue)
	}
	top := traceDocOf(t, "--top", "2", fioCapture)
	if len(top.Report.Workqueues) != 2 || len(top.Report.Functions) != 2 {
		t.Errorf("--top 2: %d workqueues, %d functions", len(top.Report.Workqueues), len(top.Report.Functions))
	}

	// A workqueue filter gives the same numbers as that workqueue's group
	// of the whole capture.
	kb := traceDocOf(t, "--workqueue", "^kblockd$", fioCapture)
	want := all.Report.Workqueue("kblockd")
	if kb.Filter == nil || len(kb.Report.Workqueues) != 1 || kb.Report.Total.Count != want.Count ||
		kb.Report.Total.QueueToStart != want.QueueToStart || kb.Report.Total.Exec != want.Exec ||
		kb.Report.Unmatched != (analyze.Unmatched{}) {
		t.Errorf("--workqueue kblockd: %+v\nwant %+v", kb.Report.Total, want)
	}
	fn := traceDocOf(t, "--function", "blk_mq_run_work_fn", fioCapture)
	wantFn := all.Report.Function("kblockd", "blk_mq_run_work_fn")
	if fn.Report.Total.Count != wantFn.Count || fn.Report.Total.QueueToStart != wantFn.QueueToStart {
		t.Errorf("--function: %+v\nwant %+v", fn.Report.Total, wantFn)
	}
	both := traceDocOf(t, "--workqueue", "ext4", "--function", "^ext4_", fioCapture)
	if both.Report.Total.Count != 199 || len(both.Report.Functions) != 1 {
		t.Errorf("both filters: %d items, %d functions", both.Report.Total.Count, len(both.Report.Functions))
	}
	code, _, stderr := run(t, "trace", "--workqueue", "^nope$", fioCapture)
	if code != exitFail || !strings.Contains(stderr, `no work items in `+fioCapture+` match --workqueue "^nope$"`) {
		t.Errorf("filter matching nothing: exit %d, %s", code, stderr)
	}
}

// TestTraceStdinCRLF reads the capture from stdin with CRLF line ends.
func TestTraceStdinCRLF(t *testing.T) {
	b, err := os.ReadFile(idleCapture)
	if err != nil {
		t.Fatal(err)
	}
	_, fileOut, _ := run(t, "trace", idleCapture)
	code, stdout, stderr := runIn(t, strings.ReplaceAll(string(b), "\n", "\r\n"), "trace", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "parsed stdin: 2888 lines, 2876 workqueue events") {
		t.Errorf("stdin parse line: %q", strings.SplitN(stdout, "\n", 2)[0])
	}
	// Everything after the first line is the same as from the file.
	_, a, _ := strings.Cut(fileOut, "\n")
	_, c, _ := strings.Cut(stdout, "\n")
	if a != c {
		t.Errorf("stdin report differs from the file's:\n%s\n---\n%s", c, a)
	}
}

// TestTraceTruncated: a capture cut in the middle of work items (events
// missing at the start and the end) is analysed, with the orphans counted.
func TestTraceTruncated(t *testing.T) {
	b, err := os.ReadFile(fioCapture)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	// From an activate_work whose queue_work is cut off, to before the
	// last execute_end.
	cut := strings.Join(lines[15:len(lines)-2], "\n")
	code, stdout, stderr := runIn(t, cut, "trace", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := regexp.MustCompile(`unmatched: queue \d+ \(superseded \d+\), activate (\d+), start (\d+), end \d+, no end (\d+)`).FindStringSubmatch(stdout)
	if m == nil || m[1] != "1" || m[2] != "1" || m[3] != "1" {
		t.Errorf("orphans at the cut not counted: %q\n%s", m, stdout)
	}
}

func TestTraceBadInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, text string
		want       []string
	}{
		{"empty.txt", "", []string{"no workqueue events in", "0 lines"}},
		{"comments.txt", "# tracer: nop\n#\n\n", []string{"no workqueue events", "3 lines", "3 skipped"}},
		{"garbage.txt", "\x00\x01\xff\xfe binary\nhello world\n  sched_switch: prev=a\n", []string{"no workqueue events", "3 other"}},
		{"malformed.txt", "x-1 [000] 1.0: workqueue_queue_work: work struct=zz\nfoo: workqueue_execute_start: ?\n",
			[]string{"2 malformed", "warning: 2 malformed workqueue line(s) skipped"}},
	}
	for _, tc := range cases {
		code, stdout, stderr := run(t, "trace", write(tc.name, tc.text))
		if code != exitFail {
			t.Errorf("%s: exit %d, want %d", tc.name, code, exitFail)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q: %s", tc.name, w, stderr)
			}
		}
		if stdout != "" {
			t.Errorf("%s: printed %q", tc.name, stdout)
		}
	}
	if code, _, stderr := run(t, "trace", filepath.Join(dir, "missing.txt")); code != exitFail || !strings.Contains(stderr, "no such file") {
		t.Errorf("missing file: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runIn(t, "", "trace", "-"); code != exitFail || !strings.Contains(stderr, "no workqueue events in stdin") {
		t.Errorf("empty stdin: exit %d: %s", code, stderr)
	}
}

func TestTraceUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace"}, "trace needs FILE"},
		{[]string{"trace", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"trace", "--live", "1s", fioCapture}, "either FILE or --live"},
		{[]string{"trace", "--live", "-1s"}, "negative --live"},
		{[]string{"trace", "--save", "x", fioCapture}, "go with --live"},
		{[]string{"trace", "--top", "-1", fioCapture}, "negative --top"},
		{[]string{"trace", "--workqueue", "(", fioCapture}, "--workqueue: error parsing regexp"},
		{[]string{"trace", "--function", "[", fioCapture}, "--function: error parsing regexp"},
		{[]string{"trace", "--live", "soon"}, "invalid argument"},
	} {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q (want %q), stdout %q", tc.args, code, stderr, tc.want, stdout)
		}
	}
}

// fakeTracefs writes plain files standing in for tracefs, trace_pipe
// holding a kernel capture.
func fakeTracefs(t *testing.T) (root string, files map[string]string) {
	t.Helper()
	root = t.TempDir()
	pipe, err := os.ReadFile(fioCapture)
	if err != nil {
		t.Fatal(err)
	}
	files = map[string]string{
		"trace_pipe": string(pipe), "trace": "", "tracing_on": "1\n", "current_tracer": "function\n",
		"buffer_size_kb": "1408\n", "events/workqueue/enable": "0\n",
		"events/workqueue/workqueue_queue_work/enable": "0\n",
	}
	for rel, v := range files {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, files
}

// TestTraceLiveFake records from a fake tracefs: the capture comes back
// analysed, --save writes it raw, and every file is as it was.
func TestTraceLiveFake(t *testing.T) {
	root, files := fakeTracefs(t)
	save := filepath.Join(t.TempDir(), "raw.txt")
	code, stdout, stderr := run(t, "trace", "--live", "30ms", "--tracefs", root, "--save", save, "--top", "1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "recorded: "+root+", ") || !strings.Contains(stdout, "parsed: 2866 lines, 2854 workqueue events") {
		t.Errorf("output:\n%s", stdout)
	}
	if f := rowOf(stdout, "kblockd"); len(f) < 2 || f[1] != "399" {
		t.Errorf("kblockd row: %q\n%s", f, stdout)
	}
	if b, err := os.ReadFile(save); err != nil || string(b) != files["trace_pipe"] {
		t.Errorf("--save: %d bytes, %v; want the %d bytes recorded", len(b), err, len(files["trace_pipe"]))
	}
	for rel, v := range files {
		if b, _ := os.ReadFile(filepath.Join(root, rel)); string(b) != v {
			t.Errorf("%s: %q after the recording, %q before", rel, b, v)
		}
	}
	code, _, stderr = run(t, "trace", "--live", "10ms", "--tracefs", filepath.Join(root, "nope"))
	if code != exitFail || !strings.Contains(stderr, "tracefs with workqueue events is not available") {
		t.Errorf("no tracefs: exit %d: %s", code, stderr)
	}
}

// needRootTracefs skips unless this process can record the real kernel.
func needRootTracefs(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to record the kernel through tracefs")
	}
	if b, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(b), "\ttracefs\n") {
		t.Skip("the kernel has no tracefs")
	}
	if testing.Short() {
		t.Skip("-short")
	}
}

// TestTraceLiveReal records the running kernel for 1 s with the fsync
// load.
func TestTraceLiveReal(t *testing.T) {
	needRootTracefs(t)
	doc := traceDocOf(t, "--live", "1s", "--fsync-load", "2ms")
	if doc.Live == nil || doc.Parse.Events == 0 || doc.Report.Total.Count == 0 || len(doc.Report.Workqueues) == 0 {
		t.Fatalf("live recording: %+v, parse %+v", doc.Live, doc.Parse)
	}
	t.Logf("recorded %d events, %d items; busiest %q", doc.Parse.Events, doc.Report.Total.Count, doc.Report.Workqueues[0].Workqueue)
}

// TestTraceLiveNobody: as user nobody, --live fails with exit 1 and says
// that root is needed (in a copy of this test binary).
func TestTraceLiveNobody(t *testing.T) {
	if os.Getenv("WQLAB_TRACE_NOBODY") == "1" {
		code, stdout, stderr := run(t, "trace", "--live", "100ms")
		os.Stdout.WriteString(stderr)
		if code != exitFail || stdout != "" {
			t.Fatalf("exit %d, stdout %q", code, stdout)
		}
		return
	}
	needRootTracefs(t)
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestTraceLiveNobody$"}, "WQLAB_TRACE_NOBODY=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "needs root (or CAP_SYS_ADMIN and access to tracefs)") {
		t.Errorf("no clear message as nobody:\n%s", out)
	}
}

// TestKernelRowsReal runs `wqlab --scenario submit --duration 1s
// --kernel` (two configurations, no burners, to stay short) and checks
// that the kernel appears as rows beside gowq, outside the verdict.
func TestKernelRowsReal(t *testing.T) {
	needRootTracefs(t)
	dir := t.TempDir()
	code, stdout, stderr := run(t, "--quick", "--scenario", "submit", "--configs", "normal-unbound,rt-unbound",
		"--duration", "1s", "--antagonist", "none", "--kernel", "--out", dir, "--no-progress")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	res := readResults(t, filepath.Join(dir, "results.json"))
	s := res.Scenario(scenario.Submit)
	var kern []scenario.Row
	for _, r := range s.Rows {
		if r.Kind == scenario.KindKernel {
			kern = append(kern, r)
		}
	}
	if len(kern) == 0 {
		t.Fatalf("no kernel row; notes %q\n%s", s.Notes, stdout)
	}
	for _, r := range kern {
		if r.Class != scenario.ClassKernel || r.Items == 0 || r.QueueToStart.Count != r.Items || !strings.HasPrefix(r.ID, "kernel:") {
			t.Errorf("kernel row %+v", r)
		}
		if !strings.Contains(stdout, "| kernel kworkers ("+r.Note+")") {
			t.Errorf("table lacks the row for %s:\n%s", r.Note, stdout)
		}
		if s.Verdict.BestRT == r.ID || s.Verdict.Loser == r.ID {
			t.Errorf("kernel row %s in the verdict: %+v", r.ID, s.Verdict)
		}
	}
	if !res.Settings.Kernel {
		t.Error("settings.kernel not set")
	}
}

// TestTraceGowqText reads gowq's own ftrace text (FtraceWriter), as a
// program traced with it would write it.
func TestTraceGowqText(t *testing.T) {
	var b bytes.Buffer
	fw := wqtrace.NewFtraceWriter(&b)
	if err := fw.WriteHeader(wqtrace.Header{Entries: 40, Written: 40, CPUs: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range int64(10) {
		base := 1_000_000_000 + i*1_000_000
		for _, e := range []wqtrace.Event{
			{Kind: wqtrace.QueueWork, TimeNs: base, TID: 10, Comm: "main", Work: 0xc000010000, Function: "main.handle", Workqueue: "io", ReqCPU: wqtrace.WorkCPUUnbound, TargetCPU: -1},
			{Kind: wqtrace.ActivateWork, TimeNs: base + 1000, TID: 10, Comm: "main", Work: 0xc000010000, Function: "main.handle"},
			{Kind: wqtrace.ExecuteStart, TimeNs: base + 5000 + i*1000, TID: 20, Comm: "gowq/u:1", Work: 0xc000010000, Function: "main.handle"},
			{Kind: wqtrace.ExecuteEnd, TimeNs: base + 50_000, TID: 20, Comm: "gowq/u:1", Work: 0xc000010000, Function: "main.handle"},
		} {
			fw.Trace(&e)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runIn(t, b.String(), "trace", "--json", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc traceDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	g := doc.Report.Workqueue("io")
	// queue->start: 5, 6, ... 14 us; execution 45 .. 36 us.
	if g == nil || g.Count != 10 || g.QueueToStart.Min != 5 || g.QueueToStart.Max != 14 || g.Exec.Max != 45 {
		t.Fatalf("io group: %+v", g)
	}
}
