package scenario

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

func kernelRow(wq string, n int64, med, p98 float64) Row {
	return Row{ID: "kernel:" + wq, Label: "kernel kworkers", Note: wq, Kind: KindKernel, Class: ClassKernel, Items: n,
		QueueToStart: Latency{Count: n, MedianUs: med, MinUs: 1, MaxUs: 10 * p98, P95Us: p98, P98Us: p98, P99Us: p98, AvgUs: med}}
}

// TestKernelRowsInTable: kernel rows print their count and queue->start
// figures, "-" in the columns that do not apply, and change neither the
// verdict nor the change columns, even when they are the fastest row.
func TestKernelRowsInTable(t *testing.T) {
	plain := fixedSubmit()
	s := fixedSubmit()
	s.Rows = append(s.Rows, kernelRow("kblockd", 500, 1, 2))
	for i := range s.Rows {
		s.Rows[i].Change = nil
	}
	computeChanges(s, defOf(Submit).changes)
	s.Verdict = computeVerdict(s, defOf(Submit).verdict)
	if !reflect.DeepEqual(s.Verdict, plain.Verdict) {
		t.Errorf("a kernel row changed the verdict:\n%+v\nwant\n%+v", s.Verdict, plain.Verdict)
	}
	if k := s.Row("kernel:kblockd"); k.Change != nil {
		t.Errorf("kernel row has change columns: %v", k.Change)
	}
	var b bytes.Buffer
	if err := s.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "| kernel kworkers (kblockd)") {
			line = l
		}
	}
	cells := strings.Split(strings.Trim(line, "| "), "|")
	want := []string{"kernel kworkers (kblockd)", "-", "500", "1.00", "1.00", "20.00", "2.00", "2.00", "2.00", "-", "-", "-"}
	if len(cells) != len(want) {
		t.Fatalf("kernel row %q: %d cells, want %d\n%s", line, len(cells), len(want), b.String())
	}
	for i := range want {
		if got := strings.TrimSpace(cells[i]); got != want[i] {
			t.Errorf("kernel row cell %d = %q, want %q", i, got, want[i])
		}
	}

	// A kernel row never becomes the change reference.
	s2 := fixedSubmit()
	s2.Rows = append([]Row{kernelRow("kblockd", 9, 1, 1)}, s2.Rows...)
	s2.Default = "kernel:kblockd"
	computeChanges(s2, defOf(Submit).changes)
	if s2.Default == "kernel:kblockd" {
		t.Error("the kernel row was taken as the change reference")
	}
}

// queued returns the four events of one work item of workqueue wq,
// queued at t us and started after lat us.
func queued(work uintptr, wq string, t, lat int64) []wqtrace.Event {
	fn := wq + "_fn"
	q := wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: t * 1000, Work: work, Function: fn, Workqueue: wq, TID: 1, CPU: 0}
	a := q
	a.Kind, a.Workqueue = wqtrace.ActivateWork, ""
	s := wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: (t + lat) * 1000, Work: work, Function: fn, TID: 9, CPU: 1}
	e := s
	e.Kind, e.TimeNs = wqtrace.ExecuteEnd, s.TimeNs+1000
	return []wqtrace.Event{q, a, s, e}
}

func TestKernelRowsPick(t *testing.T) {
	var evs []wqtrace.Event
	add := func(wq string, n int, lat int64) {
		for i := range n {
			evs = append(evs, queued(uintptr(len(evs)+1), wq, int64(len(evs))*100+int64(i), lat)...)
		}
	}
	add("kblockd", 12, 5)
	add("events", 50, 20)
	add("a", 30, 7)
	add("b", 20, 7)
	add("tiny", 3, 1)
	rows := kernelRows(analyze.Analyze(evs), time.Second)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
		if r.Kind != KindKernel || r.Class != ClassKernel || r.title() != "kernel kworkers ("+r.Note+")" {
			t.Errorf("row %+v is not marked as the kernel", r)
		}
		if r.Items != r.QueueToStart.Count || len(r.CDF) == 0 || r.MeasuredNs != int64(time.Second) {
			t.Errorf("row %s: %d items, %d samples, %d CDF points", r.ID, r.Items, r.QueueToStart.Count, len(r.CDF))
		}
	}
	if strings.Join(got, ",") != "kernel:kblockd,kernel:events,kernel:a" {
		t.Fatalf("rows %v, want kblockd first, then the busiest, at most %d", got, kernelMaxRows)
	}
	if r := rows[0]; r.Items != 12 || r.QueueToStart.MedianUs != 5 || r.QueueToStart.MaxUs != 5 {
		t.Errorf("kblockd row: %d items, %+v", r.Items, r.QueueToStart)
	}
	if rows := kernelRows(analyze.Analyze(nil), time.Second); len(rows) != 0 {
		t.Errorf("rows from no events: %v", rows)
	}
}

func runKernel(t *testing.T, tracefs string) *ScenarioResult {
	t.Helper()
	var log bytes.Buffer
	res, err := Run(context.Background(), Options{
		Scenarios: []string{Submit}, Configs: []string{"go"}, Duration: 200 * time.Millisecond,
		Antagonist: AntagonistNone, Kernel: true, KernelTracefs: tracefs, Log: &log,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Settings.Kernel {
		t.Error("settings do not record --kernel")
	}
	s := res.Scenario(Submit)
	if s == nil || s.Row("go") == nil || s.Row("go").Skipped {
		t.Fatalf("the go row was not measured: %+v", s)
	}
	return s
}

// TestRunKernelSkipped: without a usable tracefs the run goes on, with a
// note instead of kernel rows.
func TestRunKernelSkipped(t *testing.T) {
	s := runKernel(t, filepath.Join(t.TempDir(), "no-tracefs"))
	for _, r := range s.Rows {
		if r.Kind == KindKernel {
			t.Errorf("kernel row %s without tracefs", r.ID)
		}
	}
	if notes := strings.Join(s.Notes, "\n"); !strings.Contains(notes, "kernel kworkers not recorded") ||
		!strings.Contains(notes, "not available") {
		t.Errorf("notes lack the reason: %q", notes)
	}
}

// TestRunKernelFake runs with a fake tracefs whose trace_pipe holds a
// real kernel capture: its busiest workqueues become rows.
func TestRunKernelFake(t *testing.T) {
	root := t.TempDir()
	pipe, err := os.ReadFile("../../testdata/ktrace/fio-cpuio-8x90-plus-fsync.txt")
	if err != nil {
		t.Fatal(err)
	}
	for rel, v := range map[string]string{
		"trace_pipe": string(pipe), "trace": "", "tracing_on": "0\n", "current_tracer": "nop\n",
		"buffer_size_kb": "1408\n", "events/workqueue/enable": "0\n",
	} {
		p := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := runKernel(t, root)
	var ids []string
	for _, r := range s.Rows {
		if r.Kind == KindKernel {
			ids = append(ids, r.ID)
		}
	}
	// kblockd (399 items), ext4-rsv-conversion (199), events (54).
	if strings.Join(ids, ",") != "kernel:kblockd,kernel:ext4-rsv-conversion,kernel:events" {
		t.Fatalf("kernel rows %v", ids)
	}
	if k := s.Row("kernel:kblockd"); k.Items != 399 || k.QueueToStart.MaxUs != 70 {
		t.Errorf("kblockd row: %d items, max %v us (want 399, 70)", k.Items, k.QueueToStart.MaxUs)
	}
	if notes := strings.Join(s.Notes, "\n"); !strings.Contains(notes, "not part of the verdict") {
		t.Errorf("notes: %q", notes)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "tracing_on")); string(b) != "0\n" {
		t.Errorf("tracing_on left at %q", b)
	}
}
