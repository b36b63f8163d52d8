package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/gowq/wq/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowq/wq/lab/antagonist"
	"github.com/gowq/wq/lab/scenario"
)

func TestMain(m *testing.M) {
	antagonist.MaybeRunChild()
	os.Exit(m.Run())
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = execute(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--scenario", "bogus"}, `unknown scenario "bogus"`},
		{[]string{"run", "--scenario", "verity,nope"}, `unknown scenario "nope"`},
		{[]string{"--configs", "rt-percpu,xx"}, `unknown config "xx"`},
		{[]string{"--duration", "-1s"}, "negative duration"},
		{[]string{"--duration", "soon"}, "invalid argument"},
		{[]string{"--antagonist", "stress"}, `unknown antagonist "stress"`},
		{[]string{"--plot-format", "gif"}, "--plot-format"},
		{[]string{"--verity-mib", "-3"}, "negative --verity-mib"},
		{[]string{"--no-such-flag"}, "unknown flag"},
		{[]string{"extra-arg"}, "unknown command"},
	}
	for _, tc := range cases {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d", tc.args, code, exitUsage)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr %q lacks %q", tc.args, stderr, tc.want)
		}
		if stdout != "" {
			t.Errorf("%v: something ran: %q", tc.args, stdout)
		}
	}
}

func TestList(t *testing.T) {
	code, stdout, _ := run(t, "--list")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range append(scenario.Names(), "rt-percpu", "kthread-fifo", "pond", "UNBOUND|HIGHPRI") {
		if !strings.Contains(stdout, want) {
			t.Errorf("--list lacks %q", want)
		}
	}
}

func readResults(t *testing.T, path string) *scenario.Results {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := scenario.ReadJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkSubmit checks that the submit scenario has one row per
// configuration, each measured (count > 0) unless skipped for a missing
// privilege, with the reason.
func checkSubmit(t *testing.T, res *scenario.Results) {
	t.Helper()
	s := res.Scenario(scenario.Submit)
	if s == nil {
		t.Fatal("no submit scenario in the results")
	}
	var cat scenario.Info
	for _, in := range scenario.Catalog() {
		if in.Name == scenario.Submit {
			cat = in
		}
	}
	if len(s.Rows) != len(cat.Configs) {
		t.Fatalf("%d rows, want one per config (%v)", len(s.Rows), cat.Configs)
	}
	pr := res.Machine.Privileges
	for i, r := range s.Rows {
		if r.ID != cat.Configs[i] {
			t.Errorf("row %d is %q, want %q", i, r.ID, cat.Configs[i])
		}
		permitted := (r.Class != scenario.ClassRT || pr.SchedFIFO) && (r.Class != scenario.ClassHighPri || pr.Nice20)
		switch {
		case !permitted && (!r.Skipped || !strings.Contains(r.SkipReason, "not permitted")):
			t.Errorf("%s: should be skipped for lack of privilege, got skipped=%v %q", r.ID, r.Skipped, r.SkipReason)
		case permitted && (r.Skipped || r.Items == 0 || r.QueueToStart.Count == 0):
			t.Errorf("%s: not measured: skipped=%v %q, %d items", r.ID, r.Skipped, r.SkipReason, r.Items)
		}
	}
	if s.Verdict.Text == "" || s.Verdict.Metric == "" {
		t.Errorf("no verdict: %+v", s.Verdict)
	}
	if s.Load.Antagonist == "" || s.Rounds < 1 {
		t.Errorf("load/rounds missing: %+v, %d rounds", s.Load, s.Rounds)
	}
}

// TestQuickSubmitEndToEnd runs `wqlab --quick --scenario submit
// --duration 1s` in-process, with the burners, and checks what it prints
// and writes.
func TestQuickSubmitEndToEnd(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := run(t, "--quick", "--scenario", "submit", "--duration", "1s", "--out", dir, "--no-progress")
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.HasPrefix(stdout, "doctor: ") || !strings.Contains(stdout, "run `wqlab doctor` for details") {
		t.Errorf("stdout does not open with the doctor's line:\n%s", stdout)
	}
	for _, want := range []string{"== submit:", "verdict (p98 queue->start", "== summary ==\nanswer for this machine: ", "machine:",
		"load: 8 burners at 90% (qsort)", ": asked for 7.20 CPUs of work on ", "reference: normal unbound (default), "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	res := readResults(t, filepath.Join(dir, "results.json"))
	checkSubmit(t, res)
	if s := res.Scenario(scenario.Submit); s.Plot != "submit-plot.svg" {
		t.Errorf("plot = %q", s.Plot)
	}
	for _, f := range []string{"submit-plot.svg", "results.txt", "index.html"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	// The answer opens results.txt and the page, as the title's question
	// opens them.
	txt, err := os.ReadFile(filepath.Join(dir, "results.txt"))
	if err != nil || !strings.HasPrefix(string(txt), res.Answer().Text+"\n") {
		t.Errorf("results.txt does not open with the answer %q (%v):\n%.300s", res.Answer().Text, err, txt)
	}
	if !res.Settings.Quick || res.Settings.DurationNs != 1e9 {
		t.Errorf("settings = %+v", res.Settings)
	}
}

// TestJSONFlag: --json prints the document, and only it, on stdout.
func TestJSONFlag(t *testing.T) {
	code, stdout, stderr := run(t, "run", "--scenario", "submit", "--configs", "normal-percpu,go", "--duration", "200ms",
		"--antagonist", "none", "--json", "--out", "")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, stdout)
	}
	if doc["schema"] != scenario.SchemaVersion {
		t.Errorf("schema = %v", doc["schema"])
	}
}

// TestAsNobody runs the quick submit suite as user nobody (uid 65534),
// in a copy of this test binary: the run must finish, skip the RT and
// highpri rows with the reason, and measure the rest.
func TestAsNobody(t *testing.T) {
	if out := os.Getenv("WQLAB_NOBODY_OUT"); out != "" {
		// The child: run the CLI as nobody.
		code, stdout, stderr := run(t, "--quick", "--scenario", "submit", "--duration", "600ms", "--out", out, "--no-progress")
		os.Stdout.WriteString(stdout)
		os.Stderr.WriteString(stderr)
		if code != exitOK {
			t.Fatalf("exit %d", code)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to user nobody")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	cmd, dir := testutil.NobodyCommand(t, []string{"-test.run=^TestAsNobody$", "-test.v"})
	out := filepath.Join(dir, "out")
	cmd.Env = append(cmd.Env, "WQLAB_NOBODY_OUT="+out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run as nobody: %v\n%s", err, b)
	}
	t.Logf("output as nobody:\n%s", b)
	for _, want := range []string{"SCHED_FIFO NO", "RT rows will be skipped", "highpri rows will be skipped"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output as nobody lacks %q:\n%s", want, b)
		}
	}
	res := readResults(t, filepath.Join(out, "results.json"))
	if p := res.Machine.Privileges; p.EUID != 65534 || p.SchedFIFO || p.Nice20 {
		t.Fatalf("privileges as nobody: %+v", p)
	}
	checkSubmit(t, res)
}
