package wq

import (
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/gowq/wq/internal/ilist"
)

// Per-key ordering, a gowq extension (no kernel counterpart).
//
// QueueKeyed runs the items queued under one key one at a time, in queue
// order, while items of different keys run concurrently. There is no
// queue per key. A key with items in flight has a keyState in its queue's
// key table (64 shards, each a mutex and a map); the key's first item, the
// active one, is queued on the workqueue like any other item, and the
// items queued after it wait in the key's chain, an intrusive FIFO linked
// through the Work itself, with PENDING already set (so Queue and
// QueueKeyed of them return false, as for any pending item). When the
// active instance is done, that is when it finished running or was
// cancelled (Work.doneSeq reaches its seq; the hook is keyedDone, called
// from finishRun and markCancelled), the completer queues the head of the
// chain, which becomes active. When the chain is empty the keyState goes
// back to its shard's free list and the key leaves the map.
//
// Ownership (the grab protocol, docs/HACKING.md): a chained instance's
// PENDING is owned by the chain. grab takes it by unlinking the item from
// the chain (grabChained, under the shard lock), so Cancel, CancelSync,
// Disable and DisableSync act on a chained item like on a queued one, and
// the rest of the chain keeps its order. The head moves from the chain to
// the workqueue in transit (unlinked, then queued by the completer, which
// waits for nobody), exactly like an item between pendOn and insert.
//
// Flush accounting: every keyed instance has a flush color of its shard
// from QueueKeyed until it is done, like a pwq's items, so
// Workqueue.Flush waits for the chained items queued before it; Drain and
// Destroy also wait for keyedN, the count of keyed instances in flight.

// keyShards is the number of shards of a queue's key table.
const keyShards = 64

// keyStateFreeMax bounds each shard's free list of key states.
const keyStateFreeMax = 16

// keyMapShrink: a shard's map that held more keys than this is dropped
// when it empties (Go maps do not shrink), so memory follows the keys in
// flight.
const keyMapShrink = 1024

// keyTable is a queue's key table, created on its first QueueKeyed.
type keyTable struct {
	shards [keyShards]keyShard
}

// keyShard is one shard of a key table.
type keyShard struct {
	mu           sync.Mutex
	q            *Workqueue           // immutable
	m            map[uint64]*keyState // guarded by mu: keys with instances in flight
	peak         int                  // guarded by mu: largest len(m) since m was made
	free         *keyState            // guarded by mu: free list, linked by nextFree
	nfree        int                  // guarded by mu
	color        uint8                // guarded by mu: flush color given to new keyed instances
	nr           [2]int               // guarded by mu: keyed instances in flight per color
	flushWaiting bool                 // guarded by mu: a flush waits for color^1 to drain
	_            [40]byte             // keep shards on separate cache lines
}

// keyState is one key with instances in flight: the active item (queued
// on the workqueue, or running) and the chain of items waiting after it.
// All fields are guarded by sh.mu.
type keyState struct {
	sh          *keyShard // immutable: a key state is reused only in its shard
	key         uint64
	active      *Work            // the item of the active instance; never nil while in the map
	activeSeq   uint64           // the active instance's seq
	activeColor uint8            // the active instance's flush color
	chain       ilist.List[Work] // the chain, oldest first (linked through Work.knode)
	nextFree    *keyState
}

// keySeed is the process's seed for Key.
var keySeed = maphash.MakeSeed()

// Key hashes s into a key for QueueKeyed, for items keyed by a string:
// q.QueueKeyed(wq.Key(s), w). It uses hash/maphash with a seed chosen
// once per process: equal strings give equal keys within one process,
// not across processes. Distinct strings may collide, with probability
// about n²/2⁶⁵ for n keys in flight; colliding keys are only serialised
// with each other, never reordered. Never blocks, no allocation.
func Key(s string) uint64 { return maphash.String(keySeed, s) }

// QueueKeyed queues w under key: the items queued on q under one key run
// one at a time, in the order of their QueueKeyed calls; items of
// different keys run concurrently, within max_active and the pool's
// concurrency management. Keys are q's own: the same key on two queues
// is two keys. A gowq extension; the kernel has no counterpart (the
// nearest is one ordered workqueue per key).
//
// It returns true if it queued w, false if w was already pending (queued,
// chained under a key, or armed) or disabled, as Queue does. If the key
// has no item in flight, w is queued on q at once, as by Queue; otherwise
// it waits, pending, in the key's chain until the key's previous item has
// finished running or was cancelled, and is then queued by the thread
// that ended that item (a per-CPU queue runs it on that thread's CPU).
// A chained item is pending: Flush waits for it, Cancel, CancelSync,
// Disable and DisableSync remove it from the chain (the rest of the chain
// keeps its order and goes on), and Queue of it returns false. Only keyed
// instances are ordered: an instance queued with Queue runs outside every
// key, and so does one that ModDelayed re-arms (the key moves on to its
// next item without waiting for the timer).
//
// A Work has keyed instances under one key at a time: QueueKeyed of a
// Work whose keyed instance is in flight (chained, queued or running)
// under another key, or under a key of another queue, returns false and
// reports ErrKeyConflict to the error handler; w is left as it was. Once
// that instance has finished or was cancelled (w.Flush returned, say), w
// may be queued under any key.
// From outside q's own items while q drains, it returns false and reports
// ErrDraining; on a destroyed queue it returns false and reports
// ErrDestroyed once. Workqueue.Flush, Drain and Destroy wait for chained
// items as for queued ones. Memory: one key state per key with items in
// flight, released when its last item is done; no allocation per item
// once the key table has warmed up. Never blocks (the shard lock is held
// for a map lookup). Safe from any goroutine.
func (q *Workqueue) QueueKeyed(key uint64, w *Work) bool {
	const op = "queue_work_keyed"
	if q == nil {
		reportNilQueue(op)
		return false
	}
	if err := q.checkDestroyed(); err != nil {
		return q.result(op, w, err)
	}
	if w == nil || w.fn == nil {
		return q.result(op, w, ErrNoFunc)
	}
	if err := w.pendOn(q); err != nil {
		if err != errPending && err != ErrDisabled {
			return q.result(op, w, err) // w runs on another queue (instances.go)
		}
		// Pending (or disabled, or held): dedup, as Queue. A keyed
		// instance in flight under another key is a conflict.
		if ks := w.kst.Load(); ks != nil && ks.conflicts(w, q, key) {
			q.reportError(op, w.Func(), fmt.Errorf("%w: %s: key %#x: the item is pending under another key", ErrKeyConflict, q.name, key))
		}
		return false
	}
	if err := q.admitPended(w, admitNew); err != nil {
		return q.result(op, w, err) // lifecycle, other queue, MaxPending (admit.go)
	}
	seq := seqOf(w.state.Load()) // stable: we own PENDING
	sh := q.keyTable().shard(key)
	var ks *keyState
	for {
		sh.mu.Lock()
		ks = sh.m[key]
		cur := w.kst.Load()
		if cur == nil || cur == ks {
			break
		}
		sh.mu.Unlock()
		// w's keyed instances are under another key. If the active one
		// is done and only its hook has not run yet (a Flush of w may
		// return in between), run the hook now; otherwise refuse.
		if d, retry := cur.doneButLinked(w); retry {
			w.keyedDone(d, false)
			continue
		}
		// Released before the error handler runs: a handler that panics
		// or calls runtime.Goexit must not leave w pending.
		w.markCancelled()
		w.release()
		q.reportError(op, w.Func(), fmt.Errorf("%w: %s: key %#x: the item has a keyed instance in flight under another key", ErrKeyConflict, q.name, key))
		return false
	}
	q.keyedN.Add(1)
	// The lifecycle again, now that w counts in keyedN: admitPended's
	// check above may have passed before a Destroy whose drain found
	// keyedN 0 and ended meanwhile; w would then become the key's active
	// instance, or wait behind one, on a queue that refuses it, and be
	// cancelled after this call returned true. Destroy sets destroying
	// before its drain reads keyedN: either this load sees it, or the
	// drain sees w and waits for it.
	if err := q.checkOpen(admitNew); err != nil {
		q.keyedN.Add(-1)
		sh.mu.Unlock()
		w.markCancelled()
		w.release()
		return q.result(op, w, err)
	}
	sh.nr[sh.color]++
	if ks != nil {
		// The key is busy: wait in its chain, PENDING owned by the chain.
		w.kseq, w.kcolor, w.kchained = seq, sh.color, true
		ks.pushBack(w)
		w.kst.Store(ks)
		sh.mu.Unlock()
		return true
	}
	ks = sh.get(key)
	ks.active, ks.activeSeq, ks.activeColor = w, seq, sh.color
	w.kst.Store(ks)
	sh.mu.Unlock()
	// Admitted above: queued as an instance that comes back (admit.go).
	// If q refuses it now (destroyed meanwhile), markCancelled ends the
	// instance and keyedDone releases the key.
	return q.queuePendedFrom(cpuUnbound, w, admitBack)
}

// keyTable returns q's key table, creating it on first use.
func (q *Workqueue) keyTable() *keyTable {
	if t := q.keyed.Load(); t != nil {
		return t
	}
	t := &keyTable{}
	for i := range t.shards {
		t.shards[i].q = q
	}
	if q.keyed.CompareAndSwap(nil, t) {
		return t
	}
	return q.keyed.Load()
}

func (t *keyTable) shard(key uint64) *keyShard {
	return &t.shards[(key*0x9e3779b97f4a7c15)>>58] // Fibonacci hashing: top 6 bits
}

// get returns a key state for key, linked into the map. Called with mu held.
func (sh *keyShard) get(key uint64) *keyState {
	ks := sh.free
	if ks != nil {
		sh.free = ks.nextFree
		ks.nextFree = nil
		sh.nfree--
	} else {
		ks = &keyState{sh: sh}
	}
	ks.key = key
	if sh.m == nil {
		sh.m = make(map[uint64]*keyState)
	}
	sh.m[key] = ks
	if len(sh.m) > sh.peak {
		sh.peak = len(sh.m)
	}
	return ks
}

// put unlinks ks from the map and keeps it for reuse. Called with mu held.
func (sh *keyShard) put(ks *keyState) {
	delete(sh.m, ks.key)
	ks.active = nil
	ks.chain = ilist.List[Work]{}
	if len(sh.m) == 0 && sh.peak > keyMapShrink {
		sh.m, sh.peak = nil, 0
	}
	if sh.nfree < keyStateFreeMax {
		ks.nextFree = sh.free
		sh.free = ks
		sh.nfree++
	}
}

// doneLocked accounts for a keyed instance of color c that is done
// (finished, cancelled or refused). Called with mu held.
func (sh *keyShard) doneLocked(c uint8) {
	sh.q.keyedN.Add(-1)
	sh.nr[c]--
	if sh.flushWaiting && c != sh.color && sh.nr[c] == 0 {
		sh.flushWaiting = false
		sh.q.flushPwqDone()
	}
}

// flip starts a flush of the shard: new instances get the other color.
// It reports whether the flush must wait for the old color.
func (sh *keyShard) flip() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.color
	sh.color ^= 1
	if sh.nr[old] == 0 {
		return false
	}
	sh.flushWaiting = true
	return true
}

func (ks *keyState) pushBack(w *Work) { ks.chain.PushBack(&w.knode, w) }

func (ks *keyState) remove(w *Work) {
	ks.chain.Remove(&w.knode)
	w.kchained = false
}

// conflicts reports whether w has a keyed instance in flight under ks
// (chained, or active and not done) and ks is not key on q.
func (ks *keyState) conflicts(w *Work, q *Workqueue, key uint64) bool {
	sh := ks.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w.kst.Load() != ks || (sh.q == q && ks.key == key) {
		return false
	}
	return w.kchained || (ks.active == w && !w.doneUpTo(ks.activeSeq))
}

// doneButLinked reports, for a QueueKeyed of w under another key, whether
// w is not in flight under ks after all: either it left ks meanwhile, or
// its active instance is done and keyedDone has not run yet (d is then
// its doneSeq). Called with no lock held.
func (ks *keyState) doneButLinked(w *Work) (d uint64, retry bool) {
	sh := ks.sh
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if w.kst.Load() != ks {
		return 0, true
	}
	if w.kchained || ks.active != w {
		return 0, false
	}
	if !w.doneUpTo(ks.activeSeq) {
		return 0, false
	}
	return ks.activeSeq, true
}

// doneUpTo reports whether every instance of w up to seq is done: doneSeq
// has reached it and no instance runs (with an instance running, a later
// instance that ran on another pool and finished first may have moved
// doneSeq past a keyed instance that still runs). Lock order: shard lock,
// then Work.mu.
func (w *Work) doneUpTo(seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.doneSeq >= seq && w.running == 0
}

// grabChained takes a chained instance of w out of ks's chain for grab;
// the caller then owns its PENDING. It returns false when w is not
// chained in ks (any more), or, with to non-nil, when w runs on a queue
// other than to (elsewhere: the instance stays chained).
func (ks *keyState) grabChained(w *Work, to *Workqueue) (ok, elsewhere bool) {
	sh := ks.sh
	sh.mu.Lock()
	if w.kst.Load() != ks || !w.kchained {
		sh.mu.Unlock()
		return false, false
	}
	if to != nil && w.runsElsewhere(to) {
		sh.mu.Unlock()
		return false, true
	}
	ks.remove(w)
	if ks.active != w {
		w.kst.Store(nil)
	}
	sh.doneLocked(w.kcolor)
	sh.mu.Unlock()
	// The instance is now owned by the grabber, out of q's MaxPending
	// bound; markCancelled will find ks.active != w (or d < activeSeq)
	// and leave the key alone.
	w.unpendWake()
	return true, false
}

// keyedDone is the completion hook (called by finishRun and markCancelled
// without locks held): every instance of w up to d is done, or, when
// exact is set, only instance d is (other instances of w still run, on
// other pools, and may include the keyed one). If that ends the active
// instance of w's key, the next chained item becomes active and is
// queued, or the key is released.
func (w *Work) keyedDone(d uint64, exact bool) {
	ks := w.kst.Load()
	if ks == nil {
		return
	}
	sh := ks.sh
	sh.mu.Lock()
	if w.kst.Load() != ks || ks.active != w || d < ks.activeSeq || (exact && d != ks.activeSeq) {
		sh.mu.Unlock()
		return
	}
	if !w.kchained {
		w.kst.Store(nil)
	}
	sh.doneLocked(ks.activeColor)
	n := ks.chain.Front()
	if n == nil {
		sh.put(ks)
		sh.mu.Unlock()
		return
	}
	ks.remove(n)
	ks.active, ks.activeSeq, ks.activeColor = n, n.kseq, n.kcolor
	sh.mu.Unlock()
	// n is in transit (pending, on no list): a grab waits for the few
	// instructions until it is linked. It was queued before any drain
	// that may have begun since, so a draining queue accepts it; a
	// destroyed one refuses it (markCancelled then moves the key on).
	sh.q.queuePendedFrom(cpuUnbound, n, admitBack)
}

// keyStates returns the number of keys with instances in flight on q and
// the number of key states held (in maps and free lists), for tests.
func (q *Workqueue) keyStates() (keys, held int) {
	t := q.keyed.Load()
	if t == nil {
		return 0, 0
	}
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		keys += len(sh.m)
		held += len(sh.m) + sh.nfree
		sh.mu.Unlock()
	}
	return keys, held
}
