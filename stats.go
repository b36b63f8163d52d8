package wq

import (
	"sort"
	"strconv"
	"time"

	"github.com/gowq/wq/internal/sched"
)

// QueueStats are a workqueue's counters, the columns of the kernel's
// tools/workqueue/wq_monitor.py, plus latency histograms. Counters are
// totals since Alloc.
type QueueStats struct {
	Name   string
	Flags  Flags
	Policy Policy
	Total  int64 // items started (total)
	Infl   int64 // items started and not yet finished (infl)
	// CPUTime is the CPU time of the queue's items (CPUtime), from each
	// thread worker's CPU clock (goroutine workers are not charged). It
	// lags: a worker reads its clock after an item of at least 50 us,
	// before an item of another queue than the ones owed, and after an
	// item or before a park once 1 ms of wall time has passed since its
	// last read (no system call per short item), and charges what it used
	// at each read; so up to 1 ms of CPU per worker of the queue's pools
	// (what it used in about the last 1 ms of wall time before it parked)
	// shows only at that worker's next item or its exit.
	CPUTime time.Duration
	CPUItsv int64 // CPU-intensive violations (CPUitsv); unbound queues too (their pools are concurrency-managed)
	CMW     int64 // concurrency-management wake-ups (CMW)
	RPR     int64 // repatriations (RPR); unbound queues only
	Mayday  int64 // mayday requests sent to the rescuer
	Rescued int64 // items the rescuer ran
	Panics  int64 // work functions that panicked
	// Pushed counts the queue calls that put an item on its pool
	// lock-free, because a worker was between items and took it with no
	// lock and no wake-up (a gowq fast path; docs/design.md, "The wake
	// path"); Bounced those whose pwq was retired under the push, which
	// then queued the item the locked way. Ordered queues, queues with
	// escape_after, goroutine-backed queues, a queue that drains and
	// every queue while a tracer is set never take that path.
	Pushed, Bounced int64

	// ESC: items of a per-CPU queue with escape_after that ran on another
	// CPU because no worker of their CPU started them in time (a gowq
	// extension; see Workqueue.SetEscapeAfter). EscapeAfter is the
	// queue's escape_after (0: off).
	ESC         int64
	EscapeAfter time.Duration
	// Latency is queue-to-start (queue_work to execute_start), Exec is
	// execution time (execute_start to execute_end); both in ns.
	Latency HistSnapshot
	Exec    HistSnapshot
	// PWait is, per wake-up of a thread worker that then ran an item of
	// this queue, the time from its return from futex_wait to holding a P
	// again (ns): the Go runtime's part of the wake-up. Near 0 while a P
	// is idle; it grows when the process's runnable goroutines keep every
	// P busy. The stamps cost two counter reads per wake-up where the
	// time-stamp counter is the clocksource (else a clock_gettime system
	// call, 0.1-0.5 us). Goroutine-backed queues record none.
	PWait HistSnapshot
	// Fallback is true when the queue asked for a class the process may
	// not use and got a lower one (AllowRTFallback).
	Fallback bool
	// FallbackReason says why, when Fallback is true: the first blocker
	// found for the class asked ("cgroup cpu.rt_runtime_us: cpu.rt_runtime_us
	// is 0 in cgroup /sys/fs/cgroup/cpu/job ...; fix: ..."), followed, for
	// an RT queue that fell to the normal class, by "; HighPri (nice -20)
	// refused too: " and that refusal's first blocker. Set at Alloc; ""
	// otherwise.
	FallbackReason string
	// CreateErrors counts failed worker creations in the queue's pools
	// (thread limits, attributes the kernel refused), also in pools it no
	// longer uses (after an attribute change or Destroy); CreateError is
	// the latest, "" when none. While creation fails, pools retry every 100 ms
	// and summon the rescuer of MemReclaim queues.
	CreateErrors int64
	CreateError  string
	// Backlog (backpressure.go). Pending is the number of items waiting
	// on the queue: queued and not started, on the worklists, on the
	// inactive lists (over max_active) and chained under a key
	// (QueueKeyed); armed delayed items are not counted. Adds counts the
	// items queued on the queue's pwqs since Alloc (client-go's adds: an
	// item queued again while pending is not an add; a chained keyed item
	// counts when it reaches the queue). MaxPending is the queue's n, 0
	// when unbounded: the queue holds at most MaxActive + n items, the
	// running ones included, so Pending can reach n plus the places of
	// max_active that no item holds. Pending is read without locks, counter after
	// counter: exact when nothing is queued, started or finished during
	// the call, otherwise off by at most those items.
	Pending    int64
	Adds       int64
	MaxPending int

	// ClassError is set when the queue's workers could not be given their
	// class exactly (an unprivileged, niced process keeps its nice for the
	// normal class); "" when they were.
	ClassError string
}

// Stats returns a snapshot of q's counters. It never blocks for long and
// is safe from any goroutine, also from every tracer event and every
// callback, under whatever lock it runs (it takes only locks below the
// pool locks: statsMu and the key shards', pool.go's lock key); counters of different columns may be a few items apart.
// Every counter (Total, CPUTime, CPUItsv, CMW, RPR, Mayday, Rescued,
// Panics, Pushed, Bounced, ESC, CreateErrors, Adds, and the histograms'
// counts) is monotonic: a later call never returns less, across attribute
// changes, hotplug and Destroy.
func (q *Workqueue) Stats() QueueStats {
	// Summed under statsMu, so that a pwq released meanwhile is counted
	// once (releasePwqs).
	q.statsMu.Lock()
	defer q.statsMu.Unlock()
	pwqs := q.allPwqs
	s := QueueStats{Name: q.name, Flags: q.flags, Policy: q.statsPolicy, Fallback: q.fellBack, FallbackReason: q.fallbackReason,
		EscapeAfter: time.Duration(q.escapeAfter.Load())}
	seen := map[*pool]bool{}
	for _, pq := range pwqs {
		p := pq.pool
		if seen[p] {
			continue
		}
		seen[p] = true
		// Lock-free: Stats may be called from a tracer under a pool lock.
		s.CreateErrors += p.createErrN.Load()
		if m := p.createErrMsg.Load(); m != nil {
			s.CreateError = *m
		}
		if m := p.classErrMsg.Load(); m != nil && s.ClassError == "" {
			s.ClassError = *m
		}
	}
	for p, g := range q.goneErrs {
		// A pool the queue stopped using keeps its failures in the count
		// (a pool used again counts once, at its live value).
		if !seen[p] {
			s.CreateErrors += g.n
			if s.CreateError == "" {
				s.CreateError = g.msg
			}
		}
	}
	s.Pushed, s.Bounced = q.pushed.Load(), q.bounced.Load()
	q.backlogStats(&s, pwqs)
	all := make([]*pwqStats, 0, len(pwqs)+1)
	all = append(all, &q.retired)
	for _, pq := range pwqs {
		all = append(all, &pq.stats)
	}
	for _, st := range all {
		started, done := st.started.Load(), st.completed.Load()
		s.Total += started
		s.Infl += started - done
		s.CPUTime += time.Duration(st.cpuTimeNs.Load())
		s.CPUItsv += st.cpuIntensive.Load()
		s.CMW += st.cmWakeups.Load()
		s.RPR += st.repatriated.Load()
		s.Mayday += st.mayday.Load()
		s.Rescued += st.rescued.Load()
		s.ESC += st.escaped.Load()
		s.Panics += st.panics.Load()
		s.Latency = s.Latency.merge(st.latency.snapshot())
		s.Exec = s.Exec.merge(st.exec.snapshot())
		s.PWait = s.PWait.merge(st.pwait.snapshot())
	}
	return s
}

func (s HistSnapshot) merge(o HistSnapshot) HistSnapshot {
	if s.Count == 0 {
		return o
	}
	if o.Count == 0 {
		return s
	}
	m := map[int64]int64{}
	for _, b := range s.Buckets {
		m[b.LowerNs] += b.Count
	}
	for _, b := range o.Buckets {
		m[b.LowerNs] += b.Count
	}
	out := HistSnapshot{Count: s.Count + o.Count, SumNs: s.SumNs + o.SumNs, MaxNs: max(s.MaxNs, o.MaxNs)}
	for lo, c := range m {
		out.Buckets = append(out.Buckets, HistBucket{LowerNs: lo, Count: c})
	}
	sort.Slice(out.Buckets, func(i, j int) bool { return out.Buckets[i].LowerNs < out.Buckets[j].LowerNs })
	return out
}

// Queues returns the live workqueues (created and not destroyed), sorted by
// name. sysfsOnly limits it to queues created with the Sysfs flag, as the
// kernel's /sys/devices/virtual/workqueue does.
func Queues(sysfsOnly bool) []*Workqueue {
	qs := liveQueues()
	out := qs[:0]
	for _, q := range qs {
		if !sysfsOnly || q.flags&Sysfs != 0 {
			out = append(out, q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// PoolInfo describes one worker pool, like a line of wq_dump.py.
type PoolInfo struct {
	ID            int
	CPU           int    // -1 for unbound pools
	CPUs          string // CPUs its workers may run on, list format
	Pod           string // unbound: the pod, list format
	Strict        bool
	Policy        string // "SCHED_OTHER" or "SCHED_FIFO"
	Prio          int    // RT priority, 0 for SCHED_OTHER
	Nice          int    // the nice its workers run at: AskedNice, or the inherited nice they kept (Stats().ClassError)
	AskedNice     int    // the nice of the pool's class (0 for normal and SCHED_FIFO, the queue's nice for highpri)
	Workers       []WorkerInfo
	Idle          int
	Pending       int  // items on its worklist
	Disassociated bool // per-CPU pool whose CPU is offline
	// LockWaits counts the acquisitions of the pool lock that found it
	// held (by a queuer, a worker, the CM monitor...): a measure of
	// contention, and the "lock wait" cause of a late wake-up.
	LockWaits int64
	// SpinHits counts the items an idle worker caught while spinning
	// before parking (no wake-up needed); SpinMisses the spins that ended
	// with nothing to do (worker.go, "Spinning before parking").
	SpinHits, SpinMisses int64
	// Goroutines: the pool's workers are goroutines, not OS threads
	// (goroutine-backed pool, see Workqueue.GoroutineBacked); their TID
	// is 0 and their CPU -1.
	Goroutines bool
}

// WorkerInfo describes one worker thread.
type WorkerInfo struct {
	Name    string // e.g. "kworker/0:1H"
	TID     int    // thread id; 0 for a goroutine worker (PoolInfo.Goroutines)
	Idle    bool
	Func    string        // current work function, "" when idle
	Running time.Duration // how long the current item has run
	CPU     int           // CPU it last ran on (from /proc), -1 unknown
}

// Pools returns every live pool with its workers, sorted by id. It reads
// each worker's last CPU from /proc; it never blocks on work.
func Pools() []PoolInfo {
	poolRegistry.mu.Lock()
	var ps []*pool
	for _, p := range poolRegistry.m {
		ps = append(ps, p)
	}
	poolRegistry.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].id < ps[j].id })
	out := make([]PoolInfo, 0, len(ps))
	for _, p := range ps {
		c := p.key.class
		pi := PoolInfo{ID: p.id, CPU: p.key.cpu, Pod: p.key.pod, Strict: p.key.strict,
			Policy: c.policy.String(), Prio: c.prio, Nice: c.nice, AskedNice: c.nice, Goroutines: p.key.goro}
		if p.keptNiceSet.Load() {
			pi.Nice = int(p.keptNice.Load())
		}
		p.mu.Lock()
		pi.CPUs = intsList(p.cpus)
		pi.Idle = len(p.idle)
		pi.Pending = p.worklist.len()
		pi.Disassociated = p.disassociated
		p.mu.Unlock()
		pi.LockWaits = p.mu.Waits()
		pi.SpinHits, pi.SpinMisses = p.spinHits.Load(), p.spinMisses.Load()
		for _, wi := range p.snapshotWorkers() {
			cpu := -1
			if wi.TID != 0 {
				cpu = sched.LastCPU(wi.TID)
			}
			pi.Workers = append(pi.Workers, WorkerInfo{Name: wi.Name, TID: wi.TID, Idle: wi.Idle, Func: wi.Func,
				Running: time.Duration(wi.RunningNs), CPU: cpu})
		}
		out = append(out, pi)
	}
	return out
}

func intsList(cpus []int) string {
	s := ""
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if s != "" {
			s += ","
		}
		s += strconv.Itoa(cpus[i])
		if j > i {
			s += "-" + strconv.Itoa(cpus[j])
		}
		i = j + 1
	}
	return s
}

// AffinityPods returns the pods of every affinity scope over the online
// CPUs, in list format, like the first part of wq_dump.py.
func AffinityPods() map[string][]string {
	t := currentTopology()
	out := map[string][]string{}
	for _, s := range []Scope{ScopeCPU, ScopeSMT, ScopeCacheShard, ScopeCache, ScopeNUMA, ScopeSystem} {
		for _, p := range t.Pods(s) {
			out[s.String()] = append(out[s.String()], p.String())
		}
	}
	return out
}

// PoolIDs returns, for each CPU id, the id of the pool that serves items
// queued on that CPU (the last part of wq_dump.py).
func (q *Workqueue) PoolIDs() []int {
	t := q.table.Load()
	out := make([]int, len(t.cpu))
	for c, pq := range t.cpu {
		out[c] = pq.pool.id
	}
	return out
}
