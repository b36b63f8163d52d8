package sched

import "sync"

// Worker threads: what wq's pool workers and rescuers and kthread's
// workers share when a thread starts (ThreadSetup) and when code asks
// "does the caller act for this worker?" (ByThread, ByGoroutine).

// ThreadSetup is what a worker's thread is given when it starts, on the
// thread itself (a GoLocked goroutine's): its name, the CPUs it may run
// on and its scheduling class. The class is always set, also the normal
// one (SCHED_OTHER, nice 0): a new thread inherits the nice and policy of
// whichever thread created it.
type ThreadSetup struct {
	Name string // thread name; the kernel keeps its first 15 bytes
	CPUs []int  // sched_setaffinity; empty leaves the inherited affinity
	Attr Attr   // the class (sched_setattr)
}

// SetupResult says which parts of a ThreadSetup the kernel refused; nil
// fields were applied.
type SetupResult struct {
	Name, Affinity, Class error
}

// Apply gives the calling thread s's name, affinity and class, in that
// order, and tries each even if one before failed (a replacement thread
// keeps serving with what it could get; a new one is discarded by its
// caller). Three system calls; it blocks for none of them.
func (s ThreadSetup) Apply() SetupResult {
	var r SetupResult
	r.Name = SetName(s.Name)
	if len(s.CPUs) > 0 {
		r.Affinity = SetAffinity(0, s.CPUs)
	}
	r.Class = SetAttr(0, s.Attr)
	return r
}

// The thread-identity rules (docs/HACKING.md, "Threads"): a thread id
// names a worker only while the worker's goroutine owns the thread (tids
// are reused, names repeat), so a worker records its tid when its thread
// starts and forgets it on every way out; a goroutine id names a
// goroutine for the life of the process (ids are never reused), so code
// that must recognise helper goroutines acting for a worker (a user
// handler run on its behalf) records goroutine ids.

// ByThread maps the tid of each thread a worker's goroutine owns to that
// worker (wq: "am I a worker, and which?" for isChained). The zero value
// is empty. Safe from any goroutine.
type ByThread[V comparable] struct{ m sync.Map }

// Enter records the calling thread as v's and returns its tid. Call it on
// the worker's locked thread before it serves.
func (r *ByThread[V]) Enter(v V) int {
	tid := Gettid()
	r.m.Store(tid, v)
	return tid
}

// Leave forgets tid if it is still v's. Call it on every way out, before
// the goroutine ends (the thread, and its tid, die after).
func (r *ByThread[V]) Leave(tid int, v V) {
	if tid != 0 {
		r.m.CompareAndDelete(tid, v)
	}
}

// Self returns the worker whose thread the caller runs on, by tid. The
// caller must confirm with its own record of the tid (the worker may be
// leaving), as wq's worker.onSelf does.
func (r *ByThread[V]) Self() (v V, ok bool) {
	x, ok := r.m.Load(Gettid())
	if !ok {
		return v, false
	}
	return x.(V), true
}

// ByGoroutine maps the id of each goroutine that acts for a worker (its
// loop goroutine, a helper running a user callback for it) to what it is
// (kthread: "would this wait wait for the caller itself?"). The zero
// value is empty. Safe from any goroutine.
type ByGoroutine[V any] struct{ m sync.Map }

// Enter records the calling goroutine as v and returns the function that
// forgets it (defer it). When the goroutine id cannot be read (see
// GoroutineID) nothing is recorded.
func (r *ByGoroutine[V]) Enter(v V) (leave func()) {
	g, ok := GoroutineID()
	if !ok {
		return func() {}
	}
	r.m.Store(g, v)
	return func() { r.m.Delete(g) }
}

// Self returns the calling goroutine's record, or the zero V: a
// GoroutineID and a sync.Map lookup.
func (r *ByGoroutine[V]) Self() V {
	var zero V
	g, ok := GoroutineID()
	if !ok {
		return zero
	}
	if x, ok := r.m.Load(g); ok {
		return x.(V)
	}
	return zero
}
