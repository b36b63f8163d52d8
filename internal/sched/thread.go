package sched

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GoLocked runs fn in a new goroutine locked (runtime.LockOSThread) to an
// OS thread that is not the process's main thread, and never unlocks it:
// when fn returns, the goroutine exits locked and the runtime destroys the
// thread. fn may therefore change the thread's affinity, nice or policy.
//
// The main thread must be avoided: its attributes are the process's (what
// sched_getaffinity(getpid()) and taskset -p report), and the runtime
// cannot destroy it, so a locked goroutine that exits there leaves the
// thread parked with whatever attributes it was given.
//
// GoLocked is the thread gate (gate.go): it first reads the thread limits
// and, when one more thread would come within GateMargin of one, starts
// nothing and returns an error matching ErrThreadLimit (a *LimitError).
// Every thread gowq starts goes through it. It blocks for the reading
// (about 20 us, serialized with other creations), not for the thread.
func GoLocked(fn func()) error {
	if err := admit(); err != nil {
		return err
	}
	go lockedStart(fn, nil, true)
	return nil
}

func lockedStart(fn func(), ready chan<- struct{}, admitted bool) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		// Hold the main thread so that the new goroutine cannot start on
		// it, and let it go only once the new goroutine has its own thread.
		ch := make(chan struct{})
		go lockedStart(fn, ch, admitted)
		<-ch
		runtime.UnlockOSThread()
		if ready != nil {
			close(ready)
		}
		return
	}
	if admitted {
		started() // the thread exists: the kernel's counts include it now
	}
	lockedThreads.Add(1)
	defer lockedThreads.Add(-1)
	// Lock LockDepth times in all: a work function that calls
	// runtime.UnlockOSThread (once, or a few times) then only lowers the
	// nesting count, and the goroutine stays on this thread, which dies with
	// it. Owners check after running user code that they are still on the
	// thread (ThreadCheck.Same, or StillOn) to catch the rest.
	for i := 1; i < LockDepth; i++ {
		runtime.LockOSThread()
	}
	tid := unix.Gettid()
	g := claim(tid)
	defer unclaim(tid, g)
	if ready != nil {
		close(ready)
	}
	fn()
}

// claims records which GoLocked goroutine owns each thread: a claim is
// made on the thread before fn runs (before it changes any attribute), so
// that ResetThreadIf never resets a thread that a newer GoLocked
// goroutine has taken.
var claims struct {
	mu   sync.Mutex
	m    map[int]uint64 // tid -> claim
	next uint64
	// ending holds the tids of threads whose GoLocked goroutine ended
	// (unclaim), with the ns of the end: the runtime destroys such a thread
	// a moment later, with whatever attributes it was given, and
	// RuntimeNice must not count it meanwhile. Pruned once the thread is
	// gone (RuntimeNice), or after endingFor (RuntimeNice, unclaim).
	ending map[int]int64
}

// endingFor bounds how long an ended GoLocked goroutine's thread is
// taken as ending (the runtime destroys it within microseconds; a tid
// still present after that was reused).
const endingFor = int64(time.Second)

func claim(tid int) uint64 {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if claims.m == nil {
		claims.m = make(map[int]uint64)
	}
	claims.next++
	claims.m[tid] = claims.next
	return claims.next
}

func unclaim(tid int, g uint64) {
	claims.mu.Lock()
	if claims.m[tid] == g {
		delete(claims.m, tid)
		if claims.ending == nil {
			claims.ending = make(map[int]int64)
		}
		now := MonotonicNs()
		// Forget the threads that ended over endingFor ago here too, not
		// only in RuntimeNice, which a process may never call: the map
		// holds at most the threads ended within endingFor.
		for t, at := range claims.ending {
			if now-at > endingFor {
				delete(claims.ending, t)
			}
		}
		claims.ending[tid] = now
	}
	claims.mu.Unlock()
}

// RuntimeNice reports the nice of the threads on which the Go runtime may
// run ordinary goroutines: every thread of the process except those that
// a GoLocked goroutine holds (their attributes are their owner's) and
// those whose GoLocked goroutine ended (being destroyed). uniform is true
// when every such thread has the normal policy (SCHED_OTHER) and the same
// nice, which is then nice;
// false when they differ, or when the threads cannot be read. A thread
// the Go runtime starts later inherits the nice of the thread that starts
// it, one of these. Costs a directory read and a sched_getattr per
// thread; never blocks on other threads.
func RuntimeNice() (nice int, uniform bool) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, false
	}
	claims.mu.Lock()
	skip := make(map[int]bool, len(claims.m)+len(claims.ending))
	for tid := range claims.m {
		skip[tid] = true
	}
	now := MonotonicNs()
	for tid, at := range claims.ending {
		if now-at > endingFor {
			delete(claims.ending, tid)
			continue
		}
		skip[tid] = true
	}
	claims.mu.Unlock()
	live := make(map[int]bool, len(ents))
	first := true
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		live[tid] = true
		if skip[tid] {
			continue
		}
		a, err := GetAttr(tid)
		if err != nil {
			if errors.Is(err, unix.ESRCH) {
				continue // ended since the directory was read
			}
			return 0, false
		}
		if a.Policy != PolicyNormal {
			return 0, false
		}
		if first {
			nice, first = a.Nice, false
		} else if a.Nice != nice {
			return 0, false
		}
	}
	claims.mu.Lock()
	for tid := range claims.ending {
		if !live[tid] {
			delete(claims.ending, tid) // destroyed
		}
	}
	claims.mu.Unlock()
	return nice, !first
}

// Claim returns the claim of the calling thread made by GoLocked (0 if
// none). A goroutine started by GoLocked reads it first thing, to name its
// thread later in ResetThreadIf.
func Claim() uint64 {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	return claims.m[unix.Gettid()]
}

// ResetThreadIf is ResetThread for a thread that a GoLocked goroutine
// left (it was unlocked and moved): it resets thread tid only while claim
// g is still its claim, that is, no newer GoLocked goroutine has taken the
// thread (and may have set attributes of its own). It reports whether it
// reset.
func ResetThreadIf(tid int, g uint64) (bool, error) {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	if g == 0 || claims.m[tid] != g {
		return false, nil
	}
	delete(claims.m, tid)
	return true, ResetThread(tid)
}

// LockDepth is how many times GoLocked locks its goroutine to its thread
// (runtime.LockOSThread nests). A stray runtime.UnlockOSThread in user code
// run on such a thread cannot hand the thread back to the Go scheduler
// unless it is called LockDepth times.
const LockDepth = 64

// StillOn reports whether the calling goroutine still runs on thread tid.
// A goroutine started by GoLocked whose user code unlocked it LockDepth
// times may have moved to another thread: then it returns false, and the
// thread tid, with whatever attributes it was given, is back in the Go
// runtime (see ResetThread). Costs a gettid.
func StillOn(tid int) bool { return tid != 0 && unix.Gettid() == tid }

// procAttrs are the process's scheduling attributes at start-up (those of
// the main thread), which ResetThread restores.
var procAttrs struct {
	once sync.Once
	cpus []int
	attr Attr
	name string
	err  error
}

func loadProcAttrs() {
	pa := &procAttrs
	pa.once.Do(func() {
		pid := unix.Getpid()
		pa.cpus, pa.err = Affinity(pid)
		if pa.err == nil {
			pa.attr, pa.err = GetAttr(pid)
		}
		pa.name, _ = ThreadName(pid)
	})
}

func init() { loadProcAttrs() }

// ResetThread gives thread tid of this process back the attributes the
// process started with: the main thread's affinity, policy, nice and name.
// It is the repair for a worker thread that escaped to the Go runtime
// (StillOn false). Lowering nice back may be refused without privilege;
// the first error is returned and the other attributes are still reset.
func ResetThread(tid int) error {
	loadProcAttrs()
	pa := &procAttrs
	if pa.err != nil {
		return pa.err
	}
	var first error
	if err := SetAffinity(tid, pa.cpus); err != nil {
		first = err
	}
	if err := setAttrNoResetOnFork(tid, pa.attr); err != nil && first == nil {
		first = err
	}
	_ = setThreadName(tid, pa.name)
	return first
}

// Probe reports whether a new thread of this process can be given the CPU
// affinity cpus (none when empty) and the class a (nil: left as
// inherited): it starts a short-lived locked thread, applies both, and
// lets the thread die. It returns the first error (wrapping ErrPermission
// on EPERM), or the thread gate's refusal (ErrThreadLimit). It blocks
// for the thread's creation and exit (tens of us).
// Callers use it to refuse attribute values that no worker could be
// created with, before accepting them.
func Probe(cpus []int, a *Attr) error {
	errc := make(chan error, 1)
	if err := GoLocked(func() {
		if len(cpus) > 0 {
			if err := SetAffinity(0, cpus); err != nil {
				errc <- err
				return
			}
		}
		if a != nil {
			if err := SetAttr(0, *a); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}); err != nil {
		return err
	}
	return <-errc
}

// OnMainThread reports whether the caller runs on the process's main
// thread (tid == pid).
func OnMainThread() bool { return unix.Gettid() == unix.Getpid() }

// reserved Ps for RT threads; see docs/design.md "The wake path".
var pReserve struct {
	mu    sync.Mutex
	base  int // GOMAXPROCS without our reservations
	extra int // Ps reserved now
	at    int // the GOMAXPROCS we last set; another value means the program set its own
}

// ReserveP raises (n > 0) or lowers (n < 0) GOMAXPROCS by n, process-wide,
// for RT threads: each RT worker pool (package wq), each RT kthread worker
// and each set of RT timer threads reserves one P for its life, so that
// when the futex wakes it under load it finds an idle P instead of
// queueing behind busy goroutines. GOMAXPROCS is the base (the value
// before the first reservation) plus the Ps reserved. If the program sets
// GOMAXPROCS itself meanwhile, its value becomes the new base, the
// reservations made before count as included in it, and it is never
// lowered below it. Note that any explicit GOMAXPROCS setting, this one
// included, turns off the runtime's automatic updates from the cgroup CPU
// limit (Go 1.25+). Changing GOMAXPROCS stops the world, which under CPU
// load can take milliseconds, so callers reserve when a pool or thread is
// created or destroyed, never per item. Safe from any goroutine; it blocks
// for the stop-the-world.
func ReserveP(n int) {
	r := &pReserve
	r.mu.Lock()
	defer r.mu.Unlock()
	if n == 0 {
		return
	}
	reservations.Store(max(0, reservations.Load()+int32(n)))
	if h := reserveHook.Load(); h != nil {
		// After the new GOMAXPROCS is set (deferred calls run last in,
		// first out: this one before the unlock).
		defer (*h)()
	}
	if cur := runtime.GOMAXPROCS(0); cur != r.at {
		r.base, r.extra = cur, 0
	}
	extra := max(0, r.extra+n)
	if extra == r.extra {
		return
	}
	r.extra = extra
	r.at = r.base + r.extra
	runtime.GOMAXPROCS(r.at)
}

// reservations counts the live reservations (the sum of ReserveP's n,
// never below 0), also those a GOMAXPROCS set by the program has
// absorbed into its base.
var reservations atomic.Int32

// reserveHook, if set, is called after every change of the reservations,
// with pReserve.mu held (it must not call ReserveP).
var reserveHook atomic.Pointer[func()]

// ReservedPs returns how many Ps are reserved for RT threads now (live
// ReserveP reservations). Never blocks; about 1 ns.
func ReservedPs() int { return int(reservations.Load()) }

// SetReserveHook makes f run after every ReserveP that changes the
// reservations, once GOMAXPROCS is set (nil: none). f runs under
// ReserveP's lock: it must not call ReserveP. Used by package wq to keep
// goroutine items off the reserved Ps.
func SetReserveHook(f func()) {
	if f == nil {
		reserveHook.Store(nil)
		return
	}
	reserveHook.Store(&f)
}

// Claimed reports whether a GoLocked goroutine owns thread tid now.
func Claimed(tid int) bool {
	claims.mu.Lock()
	defer claims.mu.Unlock()
	return claims.m[tid] != 0
}

// ThreadCheck tells a goroutine locked to a thread whether it is still on
// that thread: a work function may unlock it (runtime.UnlockOSThread as
// many times as it was locked), and the scheduler may then move it. Same
// compares the runtime's M (the runtime's record of an OS thread, one per
// thread for the thread's life: runtime.getm, a load, about 1 ns) with
// the one recorded by Set. The check keeps the recorded M reachable, so
// that its memory is never reused for the M of a later thread: a thread's
// TLS block or FS base can be the one of a thread that exited, an M that
// the check still refers to cannot. So Same is exact, and Tid is the
// calling thread's id whenever Same holds. Owned by one goroutine; the
// zero value reports false until Set.
type ThreadCheck struct {
	m   unsafe.Pointer // the thread's M, kept reachable (see above)
	tid int
}

// Set records the calling thread (one gettid).
func (c *ThreadCheck) Set() { c.m, c.tid = getm(), Gettid() }

// Same reports whether the caller runs on the thread recorded by Set.
func (c *ThreadCheck) Same() bool { return c.m != nil && getm() == c.m }

// Tid returns the id of the thread recorded by Set (0 before Set): the
// caller's own thread id while Same reports true.
func (c *ThreadCheck) Tid() int { return c.tid }

// getm returns the calling goroutine's M (runtime.getm, exported for
// linkname: go.dev/issue/67401). The runtime declares it as returning a
// uintptr; it is declared here as a pointer, the same machine word, so
// that ThreadCheck's copy keeps the M reachable. parkstamp.s lets this
// bodyless declaration compile.
//
//go:linkname getm runtime.getm
func getm() unsafe.Pointer
