package ktrace

import (
	"context"
	"errors"
	"github.com/gowq/wq/internal/testutil"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

// needTracefs skips unless this process is root on a kernel with tracefs.
func needTracefs(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount and write tracefs")
	}
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil || !strings.Contains(string(b), "\ttracefs\n") {
		t.Skip("the kernel has no tracefs")
	}
	if st, err := os.Stat(DefaultRoot); err != nil || !st.IsDir() {
		t.Skipf("no %s to mount tracefs on", DefaultRoot)
	}
}

func isTracefs(root string) bool {
	var st unix.Statfs_t
	return unix.Statfs(root, &st) == nil && uint64(st.Type) == uint64(unix.TRACEFS_MAGIC)
}

// systemState reads what a recording may change in the real tracefs.
func systemState(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range []string{"tracing_on", "current_tracer", "buffer_size_kb", "events/workqueue/enable",
		"events/workqueue/workqueue_queue_work/enable", "events/workqueue/workqueue_activate_work/enable",
		"events/workqueue/workqueue_execute_start/enable", "events/workqueue/workqueue_execute_end/enable"} {
		b, err := os.ReadFile(filepath.Join(DefaultRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = strings.TrimSpace(string(b))
	}
	f, err := os.Open(filepath.Join(DefaultRoot, "trace"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	n, _ := io.ReadFull(f, buf)
	f.Close()
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if strings.Contains(l, "entries-in-buffer") {
			out["trace entries"] = l
		}
	}
	ents, err := os.ReadDir(filepath.Join(DefaultRoot, "instances"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	out["instances"] = strings.Join(names, ",")
	return out
}

// TestRealRecord records the kernel for 1 s while an FsyncLoad makes it
// queue block-I/O work, and checks that workqueue events were captured
// and that tracefs is mounted, or not, as it was found.
func TestRealRecord(t *testing.T) {
	needTracefs(t)
	// Hold the recorders' lock, so that another package's test does not
	// mount or unmount tracefs between the checks; Record then skips it.
	lk, err := lock(context.Background(), DefaultRoot, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if lk != nil {
			lk.Close()
		}
	}()
	mountedBefore := isTracefs(DefaultRoot)
	load, err := StartFsyncLoad("", 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := Record(context.Background(), Config{noLock: true}, time.Second)
	n, lerr := load.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if lerr != nil || n == 0 {
		t.Fatalf("fsync load: %d fsyncs, %v", n, lerr)
	}
	if rec.Stats.Events == 0 || rec.Stats.ByKind[wqtrace.QueueWork] == 0 || rec.Stats.ByKind[wqtrace.ExecuteStart] == 0 {
		t.Fatalf("no workqueue events recorded during %d fsyncs: %+v", n, rec.Stats)
	}
	if rec.Stats.Malformed != 0 {
		t.Errorf("%d malformed lines: %v", rec.Stats.Malformed, rec.Stats.FirstMalformed)
	}
	r := analyze.Analyze(rec.Events)
	if r.Total.Count == 0 {
		t.Fatalf("no item paired out of %d events", r.Events)
	}
	if isTracefs(DefaultRoot) != mountedBefore || rec.Mounted == mountedBefore {
		t.Errorf("mounted before %v, after %v, recording says it mounted: %v", mountedBefore, isTracefs(DefaultRoot), rec.Mounted)
	}
	t.Logf("%d fsyncs; %d events, %d items, %d workqueues, instance %q; notes %q",
		n, rec.Stats.Events, r.Total.Count, len(r.Workqueues), rec.Instance, rec.Notes)
}

// TestRealRestoreExact mounts tracefs (if needed) and compares its state
// before and after a recording, in a private instance and in the
// top-level buffer.
func TestRealRestoreExact(t *testing.T) {
	needTracefs(t)
	ctx := context.Background()
	// Hold the lock the recorders take, so that no other gowq recording
	// changes tracefs between the two snapshots.
	lk, err := lock(ctx, DefaultRoot, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if lk != nil {
			lk.Close()
		}
	}()
	if !isTracefs(DefaultRoot) {
		if err := unix.Mount("nodev", DefaultRoot, "tracefs", 0, ""); err != nil {
			t.Skipf("cannot mount tracefs: %v", err)
		}
		defer func() {
			if err := unmount(DefaultRoot); err != nil {
				t.Errorf("unmount: %v", err)
			}
		}()
	}
	for _, top := range []bool{false, true} {
		name := "instance"
		if top {
			name = "top-level"
		}
		t.Run(name, func(t *testing.T) {
			before := systemState(t)
			load, err := StartFsyncLoad("", 0)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := Record(ctx, Config{TopLevel: top, noLock: true}, 300*time.Millisecond)
			load.Stop()
			if err != nil {
				t.Fatal(err)
			}
			after := systemState(t)
			if rec.Stats.Events == 0 || (rec.Instance == "") != top || rec.Mounted {
				t.Errorf("recording: %d events, instance %q, mounted %v", rec.Stats.Events, rec.Instance, rec.Mounted)
			}
			notes := strings.Join(rec.Notes, "\n")
			if _, exp, _ := parseBufferSize(before["buffer_size_kb"]); top && !exp {
				// The boot-time buffer cannot be left unexpanded.
				if _, exp, ok := parseBufferSize(after["buffer_size_kb"]); !ok || !exp || !strings.Contains(notes, "never expanded") {
					t.Errorf("buffer_size_kb %q -> %q, notes %q", before["buffer_size_kb"], after["buffer_size_kb"], notes)
				}
				delete(before, "buffer_size_kb")
				delete(after, "buffer_size_kb")
			}
			if top && !strings.Contains(before["trace entries"], " 0/") {
				if !strings.Contains(notes, "discarded") {
					t.Errorf("old buffer contents discarded without a note: %q", notes)
				}
				delete(before, "trace entries")
				delete(after, "trace entries")
			}
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s: %q after the recording, %q before", k, after[k], v)
				}
			}
		})
	}
}

// TestRealNotRoot runs Start as user nobody, in a copy of this test
// binary: it must fail with ErrPermission and its clear message.
func TestRealNotRoot(t *testing.T) {
	if os.Getenv("KTRACE_NOBODY") == "1" {
		_, err := Start(context.Background(), Config{})
		if !errors.Is(err, ErrPermission) {
			t.Fatalf("Start as uid %d: %v, want ErrPermission", os.Geteuid(), err)
		}
		os.Stdout.WriteString("ERR: " + err.Error() + "\n")
		return
	}
	needTracefs(t)
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestRealNotRoot$", "-test.v"}, "KTRACE_NOBODY=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "needs root (or CAP_SYS_ADMIN") {
		t.Errorf("no clear message:\n%s", out)
	}
	t.Logf("as nobody:\n%s", out)
}
