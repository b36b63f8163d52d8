package timer

import (
	"sync/atomic"
	"testing"

	"github.com/gowq/wq/internal/sched"
	"go.uber.org/goleak"
)

// refuseThreads makes the thread gate refuse every creation while the
// returned flag is set.
func refuseThreads(t *testing.T) *atomic.Bool {
	var refuse atomic.Bool
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/test", Max: 10, Current: 10}
	restore := sched.SetGateReader(func() (int, sched.ThreadLimit, error) {
		if refuse.Load() {
			return 0, lim, nil
		}
		return 1 << 20, sched.ThreadLimit{}, nil
	})
	t.Cleanup(restore)
	return &refuse
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
