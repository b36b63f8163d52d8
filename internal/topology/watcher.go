package topology

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInterval is the rescan period of a Watcher created with a zero or
// negative interval: 1 s.
const DefaultInterval = time.Second

// ErrNilTopology is returned, wrapped, by Watcher.Rescan when its Source
// returns a nil *Topology without an error.
var ErrNilTopology = errors.New("topology: source returned a nil topology")

// Watcher keeps the current topology of a Source and reports its changes:
// CPUs going offline or online (hotplug), the process affinity being
// narrowed or widened from outside (taskset -p), and cgroup cpuset changes
// all show up as a change of Topology.Online.
//
// Linux offers no cheap notification for all of these, so the Watcher polls:
// a change is seen at the next Rescan, which Start runs every interval.
// Detection is therefore bounded by the interval (1 s by default), and a
// change that is undone within one interval may not be seen at all. Callers
// that act on hotplug must still cope with a CPU vanishing before they hear
// of it (a pinned thread is then moved by the kernel).
//
// All methods are safe for concurrent use.
type Watcher struct {
	src      Source
	interval time.Duration
	onChange func(old, new *Topology)

	cur     atomic.Pointer[Topology] // the last snapshot; atomic
	lastErr atomic.Pointer[error]    // error of the last Rescan; atomic

	scanMu sync.Mutex // serialises Rescan: read, compare, publish, onChange

	mu      sync.Mutex    // guards started, stopped
	started bool          // guarded by mu
	stopped bool          // guarded by mu
	stop    chan struct{} // closed by Stop
	done    chan struct{} // closed when the loop goroutine exits
}

// NewWatcher returns a Watcher of src that rescans every interval once
// started (DefaultInterval when interval <= 0). onChange, which may be nil,
// is called synchronously by Rescan (from the caller of Rescan or from the
// Watcher's goroutine) every time the topology changes, including the first
// successful scan, where old is nil. Calls of onChange never overlap. It must
// not call Rescan or Stop of the same Watcher (that deadlocks) and should
// return quickly, since it delays the next scan.
//
// NewWatcher does no I/O: Current returns nil until the first successful
// Rescan, so callers normally call Rescan once, check its error, then Start.
func NewWatcher(src Source, interval time.Duration, onChange func(old, new *Topology)) *Watcher {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Watcher{
		src:      src,
		interval: interval,
		onChange: onChange,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Current returns the last topology read successfully, or nil before the
// first. It is a single atomic load: lock-free, non-blocking, no allocation.
func (w *Watcher) Current() *Topology { return w.cur.Load() }

// Err returns the error of the most recent Rescan (nil when it succeeded or
// none ran yet). After a failed Rescan, Current keeps the previous snapshot.
func (w *Watcher) Err() error {
	if p := w.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Rescan reads the Source now. It returns the current topology, and changed
// = true when it differs from the previous one (Topology.Equal), in which
// case it has published it to Current and called onChange(old, new) before
// returning. On error it returns (Current(), false, err) and changes
// nothing. It blocks for the Source's Read and onChange, and waits for a
// concurrent Rescan to finish first. It works before Start and after Stop.
func (w *Watcher) Rescan() (*Topology, bool, error) {
	w.scanMu.Lock()
	defer w.scanMu.Unlock()
	t, err := w.src.Read()
	if err == nil && t == nil {
		err = ErrNilTopology
	}
	if err != nil {
		w.lastErr.Store(&err)
		return w.cur.Load(), false, err
	}
	w.lastErr.Store(nil)
	old := w.cur.Load()
	if old.Equal(t) {
		return old, false, nil
	}
	w.cur.Store(t)
	if w.onChange != nil {
		w.onChange(old, t)
	}
	return t, true, nil
}

// Start starts a goroutine that calls Rescan every interval until Stop.
// Errors are not returned: see Err. It does not block. Calling Start again,
// or after Stop, does nothing.
func (w *Watcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return
	}
	w.started = true
	go w.loop()
}

func (w *Watcher) loop() {
	defer close(w.done)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			_, _, _ = w.Rescan() // the error is kept for Err
		}
	}
}

// Stop stops the goroutine started by Start and waits until it has exited,
// which includes waiting for a Rescan (and onChange) in progress. It is
// idempotent; Stop before Start just prevents a later Start. It must not be
// called from onChange.
func (w *Watcher) Stop() {
	w.mu.Lock()
	started := w.started
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
	w.mu.Unlock()
	if started {
		<-w.done
	}
}

// Stopped reports whether Stop was called (a stopped Watcher cannot be
// started again).
func (w *Watcher) Stopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}
