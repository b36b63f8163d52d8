package driver

import (
	"context"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/lab/antagonist"
)

func TestMain(m *testing.M) {
	antagonist.MaybeRunChild()
	os.Exit(m.Run())
}

// TestLoadsHogs starts one hog per CPU, checks that they burn CPU, and
// that a second Ensure of another kind replaces them.
func TestLoadsHogs(t *testing.T) {
	m := &Loads{Logf: t.Logf}
	defer m.Close()
	m.Ensure(LoadHogs, 0)
	if !strings.Contains(m.Name(), "one hog pinned to each of") {
		t.Fatalf("hogs: name %q note %q", m.Name(), m.Note())
	}
	if os.Geteuid() != 0 && m.HogNice() != 0 && m.Note() == "" {
		t.Errorf("nice %d without privilege and no note", m.HogNice())
	}
	p := m.Probe()
	time.Sleep(100 * time.Millisecond)
	f := m.Read(p)
	if f.ProcCPUs <= 0.1 {
		t.Errorf("hogs kept %.2f CPUs busy", f.ProcCPUs)
	}
	m.Ensure(LoadNone, 0)
	if m.Name() != "none" || len(m.groups) != 0 {
		t.Errorf("after none: name %q, %d groups", m.Name(), len(m.groups))
	}
}

func TestInterleaveRotates(t *testing.T) {
	var order []int
	n := Interleave(context.Background(), 3, 3, func(row, round int) bool {
		order = append(order, row)
		return true
	})
	want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}
	if n != 3 || len(order) != len(want) {
		t.Fatalf("rounds %d, order %v; want 3 rounds, %v", n, order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

func TestInterleaveUntilDone(t *testing.T) {
	left := []int{2, 0, 5} // slices each row still needs
	steps := 0
	Interleave(context.Background(), len(left), 0, func(row, _ int) bool {
		if left[row] == 0 {
			return false
		}
		left[row]--
		steps++
		return true
	})
	if steps != 7 || left[0]+left[1]+left[2] != 0 {
		t.Errorf("steps %d, left %v; want 7 steps and nothing left", steps, left)
	}
}

func TestInterleaveStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	steps := 0
	Interleave(ctx, 4, 0, func(row, _ int) bool {
		steps++
		if steps == 3 {
			cancel()
		}
		return true
	})
	if steps != 3 {
		t.Errorf("%d steps after cancel at 3", steps)
	}
	if Interleave(context.Background(), 0, 5, func(int, int) bool { t.Error("step with no rows"); return true }) != 0 {
		t.Error("rounds with no rows")
	}
}

func TestWriteBox(t *testing.T) {
	var b strings.Builder
	WriteBox(&b, []string{"config", "n", "p99"}, []Line{
		{Cells: []string{"a", "12", "3.5"}},
		{Cells: []string{"longer name", "7"}},
		{Cells: []string{"b"}, Skipped: true, Skip: "SCHED_FIFO not permitted here at all"},
	})
	want := `+-------------+----+-----+
| config      |  n | p99 |
+-------------+----+-----+
| a           | 12 | 3.5 |
| longer name |  7 |     |
| b           | skipp... |
+-------------+----+-----+
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestGoLoadKeepsPsBusy(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 1 {
		t.Skip()
	}
	stop := GoLoad(runtime.GOMAXPROCS(0))
	// With every P spinning, runtime.NumGoroutine counts the spinners.
	n := runtime.NumGoroutine()
	time.Sleep(20 * time.Millisecond)
	stop()
	if n < runtime.GOMAXPROCS(0)+1 {
		t.Errorf("%d goroutines while the load ran", n)
	}
	if after := runtime.NumGoroutine(); after >= n {
		t.Errorf("%d goroutines after stop, %d before", after, n)
	}
	GoLoad(0)() // starts and stops nothing
}

func TestLoadsNone(t *testing.T) {
	var m Loads
	m.Ensure(LoadNone, 0)
	p := m.Probe()
	f := m.Read(p)
	if f.Antagonist != "none" || f.ProcCPUs != 0 {
		t.Errorf("facts %+v", f)
	}
	if f.Error == "" && len(f.PerCPU) == 0 {
		t.Errorf("no per-CPU utilisation and no error: %+v", f)
	}
	m.Off = true
	m.Ensure(LoadBurners, 0)
	if m.Name() != "none" || !strings.Contains(m.Note(), "--antagonist none") {
		t.Errorf("off: name %q note %q", m.Name(), m.Note())
	}
	m.Close()
	if JoinNote("a", "a") != "a" || JoinNote("", "b") != "b" || JoinNote("a", "b") != "a; b" {
		t.Error("JoinNote")
	}
}

// TestGCLoad checks that the allocation load makes GC cycles happen and
// that stop ends it.
func TestGCLoad(t *testing.T) {
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	if stop := GCLoad(0); stop == nil {
		t.Fatal("GCLoad(0) returned nil")
	} else {
		stop()
	}
	c0 := cycles()
	stop := GCLoad(256)
	deadline := time.Now().Add(5 * time.Second)
	for cycles() < c0+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n := cycles() - c0; n < 2 {
		t.Errorf("%d GC cycles in 5 s of a 256 MiB/s allocation load", n)
	}
}
