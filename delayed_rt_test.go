package wq_test

import (
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// timerThreads returns how many RT timer threads ("ktimers/...") the
// process has.
func timerThreads(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
		if err == nil && strings.HasPrefix(string(b), "ktimers/") {
			n++
		}
	}
	return n
}

// TestDelayedRTTimer: on an RT queue (per-CPU and unbound) a delayed item
// is armed on the RT timer thread, runs once when it expires, arms and
// cancels without allocating, and Destroy ends the timer thread the
// queue started. Skipped where RT queues are refused (as nobody).
func TestDelayedRTTimer(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"percpu", wq.PerCPU | wq.RT}, {"unbound", wq.Unbound | wq.RT}} {
		t.Run(c.name, func(t *testing.T) {
			before := timerThreads(t)
			q, err := wq.Alloc("rt-delayed-"+c.name, c.flags, 1)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("RT queues refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			var runs atomic.Int32
			dw := wq.NewDelayedWork(func() { runs.Add(1) })
			if !q.QueueDelayed(dw, time.Hour) {
				t.Fatal("QueueDelayed of an idle item = false")
			}
			if !dw.ArmedOnRT() {
				t.Fatal("the item is not armed on the RT timer thread")
			}
			// The thread starts without the arming waiting for it. (Where
			// another queue of the package holds RT timers, the thread
			// may be shared and outlive q: not checked then.)
			for end := time.Now().Add(10 * time.Second); before == 0 && timerThreads(t) == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("no ktimers thread while an item is armed")
				}
			}
			if !q.ModDelayed(dw, time.Millisecond) {
				t.Fatal("ModDelayed of an armed item = false")
			}
			for end := time.Now().Add(10 * time.Second); runs.Load() == 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatal("the 1 ms item never ran")
				}
			}
			dw.Flush()
			if n := testing.AllocsPerRun(200, func() {
				if !q.QueueDelayed(dw, time.Hour) || !dw.Cancel() {
					t.Fatal("QueueDelayed/Cancel of an idle item failed")
				}
			}); n != 0 {
				t.Errorf("QueueDelayed+Cancel on the RT timer: %.1f allocs/op, want 0", n)
			}
			q.Destroy()
			if n := runs.Load(); n != 1 {
				t.Fatalf("%d runs, want 1", n)
			}
			// Destroy waits for the thread's goroutine; the runtime then
			// ends the locked thread itself.
			for end := time.Now().Add(10 * time.Second); before == 0 && timerThreads(t) != 0; time.Sleep(100 * time.Microsecond) {
				if time.Now().After(end) {
					t.Fatalf("%d ktimers threads after Destroy, none before the queue", timerThreads(t))
				}
			}
		})
	}
}
