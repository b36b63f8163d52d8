package wqtrace

import "sync"

// DefaultRecorderCapacity is the capacity NewRecorder uses when asked for a
// capacity of zero or less (65536 events, about 8 MiB when full).
const DefaultRecorderCapacity = 1 << 16

// Recorder is a Tracer that keeps the most recent events in memory, in a
// bounded ring: when it is full each new event overwrites the oldest one.
// It is meant for tests and the lab, to hand events to package analyze.
//
// It is safe for concurrent use. Trace takes a mutex and copies the event;
// it allocates only while the ring grows towards its capacity.
type Recorder struct {
	mu      sync.Mutex
	buf     []Event // guarded by mu; grows up to cap
	cap     int     // immutable
	next    int     // guarded by mu; index of the oldest event once len(buf) == cap
	dropped uint64  // guarded by mu; events overwritten
}

// NewRecorder returns an empty Recorder that keeps the last capacity events.
// A capacity of zero or less means DefaultRecorderCapacity.
func NewRecorder(capacity int) *Recorder {
	if capacity <= 0 {
		capacity = DefaultRecorderCapacity
	}
	return &Recorder{cap: capacity}
}

// Trace stores a copy of *ev, overwriting the oldest event when the ring is
// full. A nil ev or an event with an invalid Kind is ignored.
func (r *Recorder) Trace(ev *Event) {
	if ev == nil || !ev.Kind.Valid() {
		return
	}
	e := *ev
	e.Context = nil // not kept: it would hold the caller's values alive
	r.mu.Lock()
	if len(r.buf) < r.cap {
		r.buf = append(r.buf, e)
	} else {
		r.buf[r.next] = e
		r.next++
		if r.next == r.cap {
			r.next = 0
		}
		r.dropped++
	}
	r.mu.Unlock()
}

// Events returns a copy of the stored events, oldest first (in the order
// Trace was called). It does not clear the Recorder.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// Len returns the number of stored events (at most the capacity).
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.buf)
}

// Cap returns the capacity given to NewRecorder (or the default).
func (r *Recorder) Cap() int { return r.cap }

// Dropped returns the number of events overwritten because the ring was
// full. The analyzer will see their partners as unmatched.
func (r *Recorder) Dropped() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped
}

// Reset discards all stored events and the dropped count; it keeps the
// memory already allocated.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.buf = r.buf[:0]
	r.next = 0
	r.dropped = 0
	r.mu.Unlock()
}
