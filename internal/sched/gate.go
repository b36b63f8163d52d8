package sched

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// The thread gate: every OS thread gowq starts goes through GoLocked, which
// checks the thread limits first and refuses with ErrThreadLimit instead of
// starting a thread the kernel would refuse.
//
// The Go runtime cannot survive a refused thread creation. Built with cgo
// (also -race), it retries pthread_create on EAGAIN 20 times over about
// 210 ms (_cgo_try_pthread_create), then aborts the process with
// "runtime/cgo: pthread_create failed: Resource temporarily unavailable";
// without cgo, clone's EAGAIN aborts at once with "runtime: failed to
// create new OS thread" (newosproc). Nothing can recover either. And a
// locked goroutine does not create its thread itself: it takes one M out
// of the runtime's pool for good, and the runtime creates the replacement
// M whenever it next needs one, from any goroutine. So the gate must stop
// short of every limit by a margin left to the runtime (ThreadMargin).
//
// The reading is conservative in three ways:
//   - the limits are read again for every creation, never trusted from a
//     cache: a limit tightened a moment ago (docker update --pids-limit,
//     systemd TasksMax=, prlimit) is seen by the next creation. A reading
//     costs about 20 us (a few small files and a getrlimit), less than the
//     thread creation and setup it guards, and creations are rare (pools
//     keep idle workers for minutes);
//   - creations allowed whose goroutine has not yet locked a thread of its
//     own (starting) are subtracted from the headroom read, since the
//     kernel's counts may not include them yet;
//   - the margin grows with GOMAXPROCS: each P may need an M of its own
//     while locked threads and system calls hold the others.
//
// Readings are serialized (gate.mu), so two creators never pass on the
// same reading.

// ErrThreadLimit is matched (errors.Is) by every refusal of the gate:
// starting one more thread would come within the margin of a thread limit.
// The refusal is a *LimitError.
var ErrThreadLimit = errors.New("thread limit reached")

// LimitError is the gate's refusal: the tightest limit, the headroom it
// leaves and the margin kept. errors.Is(err, ErrThreadLimit) is true.
type LimitError struct {
	Limit  ThreadLimit
	Left   int // threads the limit leaves, less creations in progress (>= 0)
	Margin int // threads kept for the Go runtime
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s leaves %d more threads, and %d are kept for the Go runtime (which aborts the process when it cannot create one): %s",
		e.Limit, e.Left, e.Margin, e.Limit.Fix())
}

// Is reports whether target is ErrThreadLimit.
func (e *LimitError) Is(target error) bool { return target == ErrThreadLimit }

var gate struct {
	mu       sync.Mutex
	starting int // guarded by mu: creations allowed whose goroutine has not yet locked its thread
	read     func() (int, ThreadLimit, error)
	errOnce  sync.Once
	refused  atomic.Uint64
	// maxprocs returns GOMAXPROCS; tests replace it.
	maxprocs func() int
}

func init() {
	gate.read = ThreadHeadroom
	gate.maxprocs = func() int { return runtime.GOMAXPROCS(0) }
}

// GateMargin returns how many threads below every limit the gate stops:
// ThreadMargin, or GOMAXPROCS + 4 when that is more.
func GateMargin() int { return max(ThreadMargin, gate.maxprocs()+4) }

// warnUnread logs, once per process, that a thread limit could not be
// read. The logger is user code (slog's default handler), which may start
// threads or queue work, and the callers hold the gate's lock and gowq's
// pool and slot locks above it: it logs on a goroutine of its own.
func warnUnread(err error) {
	gate.errOnce.Do(func() {
		go slog.Warn("gowq: cannot read all thread limits; unread ones are not enforced", "err", err)
	})
}

// checkLocked reads the limits and returns a *LimitError when one more
// thread (on top of those starting) would come within the margin. Called
// with gate.mu held.
func checkLocked() error {
	n, lim, err := gate.read()
	if err != nil {
		warnUnread(err)
	}
	if n != math.MaxInt {
		n -= gate.starting
	}
	if m := GateMargin(); n <= m {
		gate.refused.Add(1)
		return &LimitError{Limit: lim, Left: max(n, 0), Margin: m}
	}
	return nil
}

// CheckThreads reports whether the gate would allow one more thread now:
// nil, or an error matching ErrThreadLimit (a *LimitError). It reads the
// limits (about 20 us) and blocks for other creations' readings. Safe from
// any goroutine. Callers that start the thread use GoLocked, which checks
// again.
func CheckThreads() error {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	return checkLocked()
}

// GateHeadroom returns how many more threads the gate would allow now:
// the headroom of the tightest limit, less the creations in progress and
// the margin (GateMargin); zero or less means none, and math.MaxInt means
// that no limit applies. It reads the limits (about 20 us) and blocks for
// other creations' readings. Safe from any goroutine. Package wq bounds
// goroutine items in flight by it: the Go runtime creates a thread for
// each one that blocks in a system call.
func GateHeadroom() int {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	n, _, err := gate.read()
	if err != nil {
		warnUnread(err)
	}
	if n == math.MaxInt {
		return n
	}
	return n - gate.starting - GateMargin()
}

// lockedThreads counts the goroutines started by GoLocked that hold their
// own thread now.
var lockedThreads atomic.Int64

// LockedThreads returns how many goroutines started by GoLocked hold a
// thread of their own now: threads the Go runtime cannot give to other
// goroutines. Safe from any goroutine; an atomic load.
func LockedThreads() int { return int(lockedThreads.Load()) }

// GateStarting returns how many creations the gate allowed whose
// goroutine does not hold its own thread yet (for tests: a thread count
// read while it is above zero misses those threads). Blocks for other
// creations' readings; safe from any goroutine.
func GateStarting() int {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	return gate.starting
}

// GateRefusals returns how many creations and checks the gate has refused
// since the process started (for tests and diagnostics).
func GateRefusals() uint64 { return gate.refused.Load() }

// admit checks the limits and counts one creation as starting.
func admit() error {
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if err := checkLocked(); err != nil {
		return err
	}
	gate.starting++
	return nil
}

// started is called by an admitted goroutine once it holds its own thread.
func started() {
	gate.mu.Lock()
	gate.starting--
	gate.mu.Unlock()
}

// SetGateReader makes the gate read its headroom from f (tests); it
// returns a function that restores the real reader.
func SetGateReader(f func() (int, ThreadLimit, error)) (restore func()) {
	gate.mu.Lock()
	old := gate.read
	gate.read = f
	gate.mu.Unlock()
	return func() {
		gate.mu.Lock()
		gate.read = old
		gate.mu.Unlock()
	}
}
