package wq_test

import (
	"errors"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestRTHogReport: an RT item that spins past the RT hog threshold is
// reported once, as an RT hog.
func TestRTHogReport(t *testing.T) {
	requireRoot(t)
	if err := wq.SetRTHogThresh(30 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer wq.SetRTHogThresh(100 * time.Millisecond)
	var reports atomic.Int32
	var msg atomic.Value
	wq.SetLockupHook(func(r wq.LockupReport) {
		if r.RTHog {
			msg.Store(r.Message) // before the count, which the item waits for
			reports.Add(1)
		}
	})
	defer wq.SetLockupHook(nil)
	q := mustAlloc(t, "rt-hog", wq.Unbound|wq.RT, 0)
	done := make(chan struct{})
	// Spin (bounded by 5 s of CPU time) until the watchdog reports it.
	q.Queue(wq.NewWork(func() {
		s := threadCPU()
		for reports.Load() == 0 && threadCPU()-s < 5*time.Second {
		}
		close(done)
	}))
	<-done
	q.Flush()
	if n := reports.Load(); n != 1 {
		t.Fatalf("%d RT hog reports, want 1", n)
	}
	if m, _ := msg.Load().(string); !strings.Contains(m, "without sleeping") || !strings.Contains(m, "TestRTHogReport") {
		t.Errorf("report %q", m)
	}
	if err := wq.SetRTHogThresh(-1); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetRTHogThresh(-1) = %v", err)
	}
}

// TestObsWatchdogLockup: a pool with pending work and no progress for the
// watchdog threshold is reported in the kernel's words.
//
// The stuck pool is made as in the kernel's mayday case: every worker of
// the CPU 0 pool sleeps in an item and no new worker can be created, so the
// next item stays on the pool's worklist. (With max_active 1 instead, the
// waiting item would sit on the pwq's inactive list, not on the pool's
// worklist, and the kernel's watchdog, like gowq's, would not report it.)
func TestObsWatchdogLockup(t *testing.T) {
	oldThresh := wq.WatchdogThresh()
	if err := wq.SetWatchdogThresh(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wq.SetWatchdogThresh(oldThresh) })
	// The watchdog also logs with slog at error level; keep the test
	// output clean.
	oldLog := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { slog.SetDefault(oldLog) })

	var mu sync.Mutex
	var reports []wq.LockupReport
	wq.SetLockupHook(func(r wq.LockupReport) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	})
	t.Cleanup(func() { wq.SetLockupHook(nil) })

	q := mustAlloc(t, "obs_lockup", wq.PerCPU, 0)
	q.QueueOn(0, wq.NewWork(func() {})) // start the pool's workers
	q.Flush()
	wq.SetCreateWorkerHook(func() error { return errors.New("injected: no memory") })
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })
	all, _ := q.NumWorkers(0)
	release := make(chan struct{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	for range all {
		q.QueueOn(0, wq.NewWork(func() { <-release }))
	}
	var stuckRan atomic.Bool
	q.QueueOn(0, wq.NewWork(func() { stuckRan.Store(true) }))

	re := regexp.MustCompile(`^BUG: workqueue lockup - pool cpus=0 node=0 flags=0x0 nice=0 stuck for \d+s!$`)
	var got wq.LockupReport
	waitFor(t, "a lockup report for the CPU 0 pool", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range reports {
			if re.MatchString(r.Message) {
				got = r
				return true
			}
		}
		return false
	})
	if got.Pending < 1 || got.Stuck < 200*time.Millisecond || got.Pool != "cpus=0 node=0 flags=0x0 nice=0" {
		t.Errorf("report %+v: want pending >= 1, stuck >= 200ms, pool cpus=0", got)
	}
	if !regexp.MustCompile(`kworker/0:\d+ \(tid \d+\): .*TestObsWatchdogLockup`).MatchString(got.Workers) {
		t.Errorf("report's busy workers %q do not name the blocked item", got.Workers)
	}
	if stuckRan.Load() {
		t.Error("the stuck item ran before the report")
	}
	wq.SetCreateWorkerHook(nil)
	close(release)
	released = true
	q.Flush()
	if !stuckRan.Load() {
		t.Error("the stuck item never ran after the workers were released")
	}
}
