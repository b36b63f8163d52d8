package wq

import (
	"fmt"
	"sync"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Thread headroom readings are cached: a reading that left plenty of room
// (more than ThreadMargin + headroomSlack after the creations checked
// since) is trusted for up to headroomMaxAge; closer to a limit every
// check reads the limits again (a few small file reads).
const (
	headroomSlack  = 64
	headroomMaxAge = time.Second
)

var headroom struct {
	mu      sync.Mutex
	n       int   // guarded by mu: headroom at the last reading
	at      int64 // guarded by mu: nanotime of the last reading, 0 for none
	used    int   // guarded by mu: checks passed since the last reading
	errOnce sync.Once
	read    func() (int, sched.ThreadLimit, error) // sched.ThreadHeadroom; tests replace it
}

func init() { headroom.read = sched.ThreadHeadroom }

// checkThreadHeadroom reports an error when creating one more worker thread
// could hit a thread limit (RLIMIT_NPROC, a pids cgroup's pids.max, the
// kernel's threads-max or pid_max): the Go runtime aborts the whole process
// when it cannot create a thread, so gowq must stop short of the limit and
// treat the creation as failed. The error wraps ErrThreadLimit, names the
// limit and says how to raise it. Called before each worker creation (with
// the pool lock held) and before each attribute probe; it costs a mutex
// and, near a limit or once a second, a few small file reads. Limits that
// cannot be read are reported once with slog and treated as absent.
func checkThreadHeadroom() error {
	h := &headroom
	h.mu.Lock()
	defer h.mu.Unlock()
	now := nanotime()
	if h.at != 0 && now-h.at < int64(headroomMaxAge) && h.n-h.used > sched.ThreadMargin+headroomSlack {
		h.used++
		return nil
	}
	n, lim, err := h.read()
	if err != nil {
		h.errOnce.Do(func() {
			plog().Warn("workqueue: cannot read all thread limits; unread ones are not enforced", "err", err)
		})
	}
	h.n, h.at, h.used = n, now, 0
	if n <= sched.ThreadMargin {
		h.at = 0 // read again next time: threads may have exited
		return fmt.Errorf("%w: %s leaves %d more threads, and gowq keeps %d for the Go runtime (which aborts the process when it cannot create one): %s",
			ErrThreadLimit, lim, max(n, 0), sched.ThreadMargin, lim.Fix())
	}
	h.used = 1
	return nil
}

// resetThreadHeadroom drops the cached reading (tests).
func resetThreadHeadroom() {
	headroom.mu.Lock()
	headroom.at = 0
	headroom.mu.Unlock()
}
