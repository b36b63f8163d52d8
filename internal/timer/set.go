package timer

import (
	"sync"
	"sync/atomic"

	"github.com/gowq/wq/internal/sched"
)

// RTSet is the set of RT timer bases of one SCHED_FIFO priority: one base,
// with its own thread pinned to its CPU, per CPU that has armed a timer
// (the PREEMPT_RT kernel's ktimers/N threads). A timer armed for a CPU
// fires on that CPU, as add_timer_on() does, so the work item it queues
// is woken there without a cross-CPU wake-up; and a busy CPU wakes its
// timer thread sooner than an idle one leaves its idle state. Get the set
// with AcquireRT.
type RTSet struct {
	prio int
	refs int // guarded by registry.mu

	mu    sync.Mutex            // serialises base creation and Release
	bases atomic.Pointer[[]*RT] // indexed by CPU; nil entries not started yet; replaced whole under mu
	dead  bool                  // guarded by mu: released for good

	refused atomic.Uint64 // bases whose thread the thread gate refused
}

// registry holds the live sets, one per SCHED_FIFO priority.
var registry struct {
	mu   sync.Mutex
	sets map[int]*RTSet // guarded by mu
}

// AcquireRT returns the process's RT timer set for SCHED_FIFO priority
// prio (1..99) and takes a reference on it; the caller gives it back with
// Release once nothing it armed there can fire any more. It never blocks
// beyond a leaf mutex; it allocates only when it creates the set. No
// thread starts before On is called.
func AcquireRT(prio int) *RTSet {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if s := registry.sets[prio]; s != nil {
		s.refs++
		return s
	}
	if registry.sets == nil {
		registry.sets = map[int]*RTSet{}
	}
	s := &RTSet{prio: prio, refs: 1}
	registry.sets[prio] = s
	return s
}

// Prio returns the set's SCHED_FIFO priority.
func (s *RTSet) Prio() int { return s.prio }

// On returns the base that fires timers on CPU cpu (cpu < 0: the CPU the
// caller runs on, one getcpu system call). The first call for a CPU
// starts its thread (sched.GoLocked) without waiting for it: timers armed
// meanwhile fire once it runs. When the thread gate refuses that thread
// (a thread limit is near), On returns nil and starts nothing: the caller
// uses a Go timer (Timer.Reset with a nil base), and the next On for the
// CPU tries again. Never blocks beyond a leaf mutex and, when it starts a
// base, the gate's reading of the limits (about 20 us); it allocates only
// when it starts a base. On after the last Release is a
// bug; it then returns a base that is stopped, whose timers never fire.
func (s *RTSet) On(cpu int) *RT {
	if cpu < 0 {
		cpu = sched.GetCPU()
	}
	if p := s.bases.Load(); p != nil && cpu < len(*p) {
		if b := (*p)[cpu]; b != nil {
			return b
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*RT
	if p := s.bases.Load(); p != nil {
		old = *p
		if cpu < len(old) && old[cpu] != nil {
			return old[cpu]
		}
	}
	first := true
	for _, o := range old {
		first = first && o == nil
	}
	b := &RT{prio: s.prio, cpu: cpu, reserveP: first, done: make(chan struct{})}
	if s.dead {
		b.quit = true
		close(b.done)
		return b
	}
	if err := sched.GoLocked(func() { b.threadMain(true) }); err != nil {
		// The thread gate refused (a thread limit is near): no base for
		// cpu yet; the caller arms a Go timer instead, and a later On
		// tries again.
		s.refused.Add(1)
		return nil
	}
	n := max(len(old), cpu+1)
	bases := make([]*RT, n)
	copy(bases, old)
	bases[cpu] = b
	s.bases.Store(&bases)
	return b
}

// Refused returns how many times On could not start a base's thread (the
// thread gate refused it near a thread limit).
func (s *RTSet) Refused() uint64 { return s.refused.Load() }

// Release drops a reference taken by AcquireRT. The last one stops every
// base's thread once its heap is empty and, unless called from one of
// those threads, waits for them to exit (microseconds each, plus a
// stop-the-world to give back the set's reserved P). A set released for good is
// not reused: AcquireRT then makes a new one.
func (s *RTSet) Release() {
	registry.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(registry.sets, s.prio)
	}
	registry.mu.Unlock()
	if !last {
		return
	}
	s.mu.Lock()
	s.dead = true
	var bases []*RT
	if p := s.bases.Load(); p != nil {
		bases = *p
	}
	s.mu.Unlock()
	self := sched.Gettid()
	for _, b := range bases {
		if b == nil {
			continue
		}
		b.mu.Lock()
		b.quit = true
		b.mu.Unlock()
		b.parker.Unpark()
		if self != b.tid() {
			<-b.done
		}
	}
}

// Bases returns the set's started bases (for tests and diagnostics).
func (s *RTSet) Bases() []*RT {
	var out []*RT
	if p := s.bases.Load(); p != nil {
		for _, b := range *p {
			if b != nil {
				out = append(out, b)
			}
		}
	}
	return out
}
