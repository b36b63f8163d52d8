package ktrace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gowq/wq/wqtrace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const capture = "../../testdata/ktrace/fio-cpuio-8x90-plus-fsync.txt"

// fakeTracefs writes a directory tree of plain files that stands in for
// tracefs: the files a recording reads and writes, with trace_pipe
// holding the text of a real capture.
func fakeTracefs(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	pipe, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	def := map[string]string{
		"trace_pipe":              string(pipe),
		"trace":                   "",
		"tracing_on":              "1\n",
		"current_tracer":          "nop\n",
		"buffer_size_kb":          "1408\n",
		"events/workqueue/enable": "0\n",
		"events/workqueue/workqueue_queue_work/enable":    "0\n",
		"events/workqueue/workqueue_activate_work/enable": "0\n",
		"events/workqueue/workqueue_execute_start/enable": "0\n",
		"events/workqueue/workqueue_execute_end/enable":   "0\n",
	}
	for k, v := range files {
		def[k] = v
	}
	for rel, v := range def {
		if v == "<dir>" {
			if err := os.MkdirAll(filepath.Join(root, rel), 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if v == "<none>" {
			continue
		}
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// snapshot returns every file and directory under root with its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffSnap(t *testing.T, before, after map[string]string) {
	t.Helper()
	var keys []string
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b, okb := before[k]
		a, oka := after[k]
		switch {
		case !okb:
			t.Errorf("%s: left behind (%q)", k, a)
		case !oka:
			t.Errorf("%s: removed", k)
		case a != b:
			t.Errorf("%s: %q, want %q as found", k, a, b)
		}
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func wantEvents(t *testing.T) int {
	t.Helper()
	f, err := os.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := wqtrace.Parse(f)
	if err != nil || len(evs) == 0 {
		t.Fatalf("capture: %d events, %v", len(evs), err)
	}
	return len(evs)
}

// TestFakeTopLevel records from a fake tracefs without instances: the
// top-level files are set while recording and written back after.
func TestFakeTopLevel(t *testing.T) {
	root := fakeTracefs(t, map[string]string{
		"current_tracer": "function_graph\n",
		"tracing_on":     "0\n",
		"buffer_size_kb": "7 (expanded: 1408)\n",
	})
	before := snapshot(t, root)
	s, err := Start(context.Background(), Config{Root: root, BufferKB: 2048, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if s.Instance() != "" || s.Root() != root {
		t.Errorf("instance %q root %q", s.Instance(), s.Root())
	}
	for rel, want := range map[string]string{
		"tracing_on": "1", "current_tracer": "nop", "buffer_size_kb": "2048", "events/workqueue/enable": "1",
	} {
		if got := read(t, root, rel); got != want {
			t.Errorf("while recording %s = %q, want %q", rel, got, want)
		}
	}
	rec, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// The unexpanded buffer cannot be put back as it was: it is left at
	// its expanded size, and a note says so.
	if got := read(t, root, "buffer_size_kb"); got != "1408" {
		t.Errorf("buffer_size_kb = %q, want 1408", got)
	}
	before["buffer_size_kb"] = "1408\n"
	diffSnap(t, before, snapshot(t, root))
	if n := wantEvents(t); len(rec.Events) != n || rec.Stats.Events != n {
		t.Errorf("recorded %d events (stats %d), want %d", len(rec.Events), rec.Stats.Events, n)
	}
	if rec.Instance != "" || rec.Mounted || rec.Root != root {
		t.Errorf("recording %+v", rec)
	}
	if !strings.Contains(strings.Join(rec.Notes, "\n"), "never expanded") {
		t.Errorf("notes %q lack the buffer_size_kb remark", rec.Notes)
	}
	if _, err := s.Stop(); !errors.Is(err, ErrStopped) {
		t.Errorf("second Stop: %v, want ErrStopped", err)
	}
}

// TestFakePartlyEnabled: events/workqueue/enable "X" is restored through
// the per-event switches, and old buffer contents are reported.
func TestFakePartlyEnabled(t *testing.T) {
	root := fakeTracefs(t, map[string]string{
		"events/workqueue/enable":                         "X\n",
		"events/workqueue/workqueue_execute_start/enable": "1\n",
		"trace": "# tracer: nop\n#\n# entries-in-buffer/entries-written: 17/20   #P:2\n",
	})
	before := snapshot(t, root)
	rec, err := Record(context.Background(), Config{Root: root, PollInterval: time.Millisecond}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// The old buffer contents are gone (the kernel cannot take them back).
	if got := read(t, root, "trace"); got != "" {
		t.Errorf("trace not cleared: %q", got)
	}
	before["trace"] = ""
	// In tracefs the group's enable file is derived from the four
	// per-event switches ("X" cannot be written); those are what is
	// restored. The fake's plain file keeps the last write.
	if got := read(t, root, "events/workqueue/enable"); got != "1" {
		t.Errorf("group enable = %q; the per-event switches should have been restored instead", got)
	}
	delete(before, "events/workqueue/enable")
	after := snapshot(t, root)
	delete(after, "events/workqueue/enable")
	diffSnap(t, before, after)
	if !strings.Contains(strings.Join(rec.Notes, "\n"), "held 17 events") {
		t.Errorf("notes %q lack the discarded events", rec.Notes)
	}
}

// TestFakeInstanceDirFallsBack: an instances directory where mkdir makes
// a plain directory is not used; nothing is left in it.
func TestFakeInstanceDirFallsBack(t *testing.T) {
	root := fakeTracefs(t, map[string]string{"instances": "<dir>"})
	before := snapshot(t, root)
	rec, err := Record(context.Background(), Config{Root: root, PollInterval: time.Millisecond}, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	diffSnap(t, before, snapshot(t, root))
	if rec.Instance != "" || len(rec.Events) == 0 {
		t.Errorf("instance %q, %d events", rec.Instance, len(rec.Events))
	}
}

// TestFakeInstance makes mkdir in instances/ behave as in tracefs: the
// recording uses the instance, leaves the top level alone and removes
// the instance after.
func TestFakeInstance(t *testing.T) {
	root := fakeTracefs(t, map[string]string{"instances": "<dir>"})
	pipe, _ := os.ReadFile(filepath.Join(root, "trace_pipe"))
	if err := os.WriteFile(filepath.Join(root, "trace_pipe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var made string
	old := mkdir
	mkdir = func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		made = dir
		for rel, v := range map[string]string{
			"trace_pipe": string(pipe), "trace": "", "tracing_on": "1\n", "buffer_size_kb": "1410\n",
			"events/workqueue/enable": "0\n",
		} {
			p := filepath.Join(dir, rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() { mkdir = old }()
	before := snapshot(t, root)
	// An instance left by a gowq process that died (no such pid) is
	// removed; one of a live process is not.
	stale := filepath.Join(root, "instances", "gowq-2147483647-1")
	live := filepath.Join(root, "instances", fmt.Sprintf("gowq-%d-1", os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, "events"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Start(context.Background(), Config{Root: root, BufferKB: 3000, PollInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if s.Instance() == "" || filepath.Join(root, "instances", s.Instance()) != made {
		t.Fatalf("instance %q, made %q", s.Instance(), made)
	}
	for rel, want := range map[string]string{"tracing_on": "1", "buffer_size_kb": "3000", "events/workqueue/enable": "1"} {
		if got := read(t, made, rel); got != want {
			t.Errorf("instance %s = %q, want %q", rel, got, want)
		}
	}
	rec, err := s.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(strings.Join(rec.Notes, "\n"), "gowq-2147483647-1") {
		t.Errorf("stale instance not removed (%v) or not noted (%q)", err, rec.Notes)
	}
	if err := os.RemoveAll(live); err != nil { // it was kept; take it out for the comparison
		t.Fatal(err)
	}
	diffSnap(t, before, snapshot(t, root))
	if n := wantEvents(t); len(rec.Events) != n {
		t.Errorf("%d events from the instance, want %d", len(rec.Events), n)
	}
}

// TestFakeErrors: a root that is not tracefs, and a failure half-way
// through the setup, which must put back what was already changed.
func TestFakeErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Start(ctx, Config{Root: filepath.Join(t.TempDir(), "nope")}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("missing root: %v, want ErrUnavailable", err)
	}
	noEvents := fakeTracefs(t, map[string]string{"events/workqueue/enable": "<none>"})
	if _, err := Start(ctx, Config{Root: noEvents}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "workqueue") {
		t.Errorf("no workqueue events: %v, want ErrUnavailable", err)
	}

	// buffer_size_kb cannot be read: current_tracer and tracing_on were
	// already changed and must be back.
	root := fakeTracefs(t, map[string]string{"current_tracer": "function\n", "buffer_size_kb": "lots\n"})
	before := snapshot(t, root)
	_, err := Start(ctx, Config{Root: root})
	if err == nil || !strings.Contains(err.Error(), "buffer_size_kb") {
		t.Fatalf("bad buffer_size_kb: %v", err)
	}
	diffSnap(t, before, snapshot(t, root))
}

// TestBusy: Start waits for the lock held by another recording of the
// same tracefs and gives up with ErrBusy when its context ends.
func TestBusy(t *testing.T) {
	root := fakeTracefs(t, nil)
	lk, err := lock(context.Background(), root, false)
	if err != nil || lk == nil {
		t.Fatalf("lock: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = Start(ctx, Config{Root: root})
	lk.Close()
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start while locked: %v, want ErrBusy", err)
	}
	// Released: it works again.
	if _, err := Record(context.Background(), Config{Root: root}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// TestRecordCancelled: a cancelled context ends the recording early; the
// recording comes back with the context's error, and the state is put
// back.
func TestRecordCancelled(t *testing.T) {
	root := fakeTracefs(t, nil)
	before := snapshot(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	rec, err := Record(ctx, Config{Root: root, PollInterval: time.Millisecond}, time.Hour)
	if !errors.Is(err, context.Canceled) || rec == nil || len(rec.Events) == 0 {
		t.Fatalf("cancelled Record: %v, %v", rec, err)
	}
	diffSnap(t, before, snapshot(t, root))
}

func TestParseBufferSize(t *testing.T) {
	for _, tc := range []struct {
		in       string
		size     int
		expanded bool
		ok       bool
	}{
		{"1408", 1408, true, true},
		{"7 (expanded: 1408)", 1408, false, true},
		{"x", 0, true, false},
	} {
		size, exp, ok := parseBufferSize(tc.in)
		if ok != tc.ok || ok && (size != tc.size || exp != tc.expanded) {
			t.Errorf("parseBufferSize(%q) = %d, %v, %v", tc.in, size, exp, ok)
		}
	}
}

func TestFsyncLoad(t *testing.T) {
	l, err := StartFsyncLoad(t.TempDir(), time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second) // a generous bound, not a measurement
	for l.Fsyncs() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	n, err := l.Stop()
	if err != nil || n < 3 {
		t.Fatalf("Stop: %d fsyncs, %v", n, err)
	}
	if _, err := os.Stat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file %s not removed: %v", l.Path(), err)
	}
	if n2, err := l.Stop(); n2 != n || err != nil {
		t.Errorf("second Stop: %d, %v", n2, err)
	}
	if _, err := StartFsyncLoad(filepath.Join(t.TempDir(), "nope"), 0); err == nil {
		t.Error("fsync load in a missing directory did not fail")
	}
}
