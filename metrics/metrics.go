package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gowq/wq"
)

// ErrInvalidOptions is wrapped by the errors NewCollector returns for bad
// Options.
var ErrInvalidOptions = errors.New("metrics: invalid options")

// Options configure a Collector. The zero value is ready to use.
type Options struct {
	// Namespace is the first part of every metric name; "" means "gowq".
	// It must be a valid Prometheus name part ([a-zA-Z_][a-zA-Z0-9_]*).
	Namespace string
	// Buckets are the upper bounds, in seconds, of the histogram buckets,
	// strictly increasing, each > 0 and finite; nil means DefaultBuckets().
	Buckets []float64
	// ConstLabels are added to every metric (for example an instance
	// name); nil means none.
	ConstLabels prometheus.Labels
	// Workqueues selects the workqueues to export by name; nil exports
	// every live workqueue. It is called at each scrape and must be safe
	// for concurrent use. Pools are always exported.
	Workqueues func(name string) bool
	// ClientGo adds, for each workqueue, the seven series of client-go's
	// workqueue metrics under client-go's names, label, help and buckets:
	// workqueue_depth, workqueue_adds_total,
	// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
	// workqueue_unfinished_work_seconds,
	// workqueue_longest_running_processor_seconds and
	// workqueue_retries_total, each with the label name (the queue's
	// name), whatever Namespace is (see the package doc). They are added to
	// the Collector's own series, not put in their place. A registry that
	// holds client-go's own workqueue metrics cannot also register a
	// Collector with ClientGo set: the names collide.
	ClientGo bool
}

// Bounds of the default histogram buckets, as powers of two in ns.
const (
	minBucketExp = 10 // 1.024 us
	maxBucketExp = 36 // 68.7 s
)

// DefaultBuckets returns the default histogram bucket bounds in seconds:
// the powers of two from 2^10 ns (1.024 us) to 2^36 ns (about 68.7 s), 27
// bounds. They are bucket boundaries of wq's histograms, so the counts are
// exact. It returns a new slice on each call.
func DefaultBuckets() []float64 {
	out := make([]float64, 0, maxBucketExp-minBucketExp+1)
	for e := minBucketExp; e <= maxBucketExp; e++ {
		out = append(out, float64(int64(1)<<e)/1e9)
	}
	return out
}

// Collector is a prometheus.Collector over every live workqueue
// (wq.Queues(false), or those Options.Workqueues selects) and every worker
// pool (wq.Pools()). Collect takes a
// snapshot at each scrape; it never blocks on work items, only briefly on
// the queues' and pools' locks, and reads each worker's last CPU from
// /proc. A Collector is safe for concurrent use and may be registered in
// several registries.
//
// Queues that share a name are exported as one series per metric, their
// counters summed. Every exported counter is monotonic: the Collector
// keeps, per name, the final counters of the queues of that name it saw
// alive at an earlier scrape and that were destroyed since, and adds them
// to the name's live queues, so that destroying one of two queues of a
// name (or destroying a queue and allocating another of its name) is not
// read as a counter reset by Prometheus's rate(). A name whose queues are
// all destroyed is no longer exported until a queue of that name is
// allocated again. Counters of a queue allocated and destroyed between
// two scrapes are never seen.
type Collector struct {
	boundsNs []int64   // histogram bounds in ns, increasing
	boundsS  []float64 // the same in seconds, as given
	filter   func(string) bool

	mu   sync.Mutex                 // guards seen and gone; held through a scrape's sampling
	seen map[*wq.Workqueue]struct{} // queues exported at the last scrape
	gone map[string]wq.QueueStats   // per name: summed counters of its destroyed queues

	info, maxActive                                    *prometheus.Desc
	started, completed, inFlight, cpuSeconds           *prometheus.Desc
	cpuIntensive, cmWakeups, repatriations             *prometheus.Desc
	mayday, rescued, panics                            *prometheus.Desc
	escapes                                            *prometheus.Desc
	queueDuration, workDuration                        *prometheus.Desc
	pwaitDuration                                      *prometheus.Desc
	poolWorkers, poolIdle, poolPending, poolMaxRunning *prometheus.Desc

	// client-go's workqueue metrics (backlog.go).
	depth, adds, unfinished, longest *prometheus.Desc

	clientGo *clientGo // nil unless Options.ClientGo (clientgo.go)
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector configured by opts. It returns an error
// wrapping ErrInvalidOptions for a bad Namespace or Buckets. Register the
// result with prometheus.Register (or a registry's Register).
func NewCollector(opts Options) (*Collector, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = "gowq"
	}
	if !validName(ns) {
		return nil, fmt.Errorf("%w: namespace %q is not a valid metric name part", ErrInvalidOptions, ns)
	}
	c := &Collector{}
	bounds := opts.Buckets
	if bounds == nil {
		bounds = DefaultBuckets()
	}
	for i, b := range bounds {
		if math.IsNaN(b) || math.IsInf(b, 0) || b <= 0 {
			return nil, fmt.Errorf("%w: bucket bound %v (want finite and > 0)", ErrInvalidOptions, b)
		}
		if i > 0 && b <= bounds[i-1] {
			return nil, fmt.Errorf("%w: bucket bounds not strictly increasing at %v", ErrInvalidOptions, b)
		}
		if b > math.MaxInt64/1e9 {
			return nil, fmt.Errorf("%w: bucket bound %v s is too large", ErrInvalidOptions, b)
		}
		c.boundsNs = append(c.boundsNs, int64(math.Round(b*1e9)))
	}
	c.boundsS = slices.Clone(bounds)
	c.filter = opts.Workqueues

	cl := opts.ConstLabels
	q := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "workqueue", name), help, append([]string{"workqueue"}, labels...), cl)
	}
	p := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "pool", name), help, []string{"pool", "cpu", "cpus", "policy", "nice"}, cl)
	}
	c.info = q("info", "Workqueue description; always 1. type is percpu, unbound or ordered; policy is the worker class (normal, highpri, fifo).", "type", "policy", "flags")
	c.maxActive = q("max_active", "The workqueue's max_active: in-flight items per CPU (per-CPU queues) or in the system (unbound queues).")
	c.started = q("items_started_total", "Work items started (wq_monitor total).")
	c.completed = q("items_completed_total", "Work items whose function returned (or panicked).")
	c.inFlight = q("items_in_flight", "Work items started and not yet completed (wq_monitor infl).")
	c.cpuSeconds = q("cpu_seconds_total", "CPU time consumed by the workqueue's items, from each worker thread's CPU clock (wq_monitor CPUtime).")
	c.cpuIntensive = q("cpu_intensive_violations_total", "Items of a per-CPU workqueue that ran past cpu_intensive_thresh without sleeping and left concurrency management (wq_monitor CPUitsv).")
	c.cmWakeups = q("cm_wakeups_total", "Concurrency-management wake-ups of another worker while an item of this per-CPU workqueue slept (wq_monitor CMW).")
	c.repatriations = q("repatriations_total", "Workers of this unbound workqueue moved back into their affinity pod (wq_monitor RPR).")
	c.mayday = q("mayday_total", "Mayday requests sent to the rescuer of this MEM_RECLAIM workqueue.")
	c.rescued = q("rescued_total", "Work items executed by the rescuer of this MEM_RECLAIM workqueue.")
	c.escapes = q("escapes_total", "Items of this per-CPU workqueue run on another CPU because no worker of their CPU started them within escape_after (ESC; a gowq extension).")
	c.panics = q("panics_total", "Work functions of this workqueue that panicked (recovered).")
	c.queueDuration = q("queue_duration_seconds", "Scheduling latency: time from queueing a work item (workqueue_queue_work) to the start of its execution (workqueue_execute_start).")
	c.workDuration = q("work_duration_seconds", "Execution time of work items (workqueue_execute_start to workqueue_execute_end).")
	c.pwaitDuration = q("p_wait_seconds", "Time from a woken worker thread's return from futex_wait to holding a Go P again, per wake-up that then ran an item of this workqueue (wq.QueueStats.PWait): long when the process's runnable goroutines keep every P busy.")
	c.poolWorkers = p("workers", "Worker threads of the pool.")
	c.poolIdle = p("idle_workers", "Idle worker threads of the pool.")
	c.poolPending = p("pending_items", "Work items on the pool's worklist, waiting for a worker.")
	c.poolMaxRunning = p("max_running_seconds", "Longest time the item a worker of the pool currently executes has been running; 0 when all are idle.")
	c.backlogDescs(q)
	if opts.ClientGo {
		c.clientGo = newClientGo(cl)
	}
	return c, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Describe sends the descriptors of every metric the Collector can
// produce. It implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.info, c.maxActive, c.started, c.completed, c.inFlight, c.cpuSeconds,
		c.cpuIntensive, c.cmWakeups, c.repatriations, c.mayday, c.rescued, c.panics, c.escapes,
		c.queueDuration, c.workDuration, c.pwaitDuration, c.poolWorkers, c.poolIdle, c.poolPending, c.poolMaxRunning,
		c.depth, c.adds, c.unfinished, c.longest} {
		ch <- d
	}
	if c.clientGo != nil {
		for _, d := range c.clientGo.descs() {
			ch <- d
		}
	}
}

// queueSample is the merged statistics of the live queues sharing a name.
type queueSample struct {
	name       string
	typ        string
	policy     string
	flags      string
	unbound    bool
	memReclaim bool
	maxActive  int
	st         wq.QueueStats
	run        wq.RunningStats
}

// queueType returns "ordered", "unbound" or "percpu", the TYPE column of
// the kernel's wq_dump.py (wq.Workqueue.Type).
func queueType(q *wq.Workqueue) string { return q.Type().String() }

func (c *Collector) sampleQueues() []*queueSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	byName := map[string]*queueSample{}
	var out []*queueSample
	live := wq.Queues(false)
	alive := make(map[*wq.Workqueue]bool, len(live))
	now := make(map[*wq.Workqueue]struct{}, len(live))
	for _, q := range live {
		alive[q] = true
		if c.filter == nil || c.filter(q.Name()) {
			now[q] = struct{}{}
		}
	}
	for q := range c.seen {
		if !alive[q] {
			// Destroyed since the last scrape: its Stats are final.
			if c.gone == nil {
				c.gone = map[string]wq.QueueStats{}
			}
			c.gone[q.Name()] = mergeCounters(c.gone[q.Name()], q.Stats())
		}
	}
	c.seen = now
	// Queues that share a name are exported as one, with the labels (type,
	// policy, flags) of the first: order them by every label, so that the
	// first is the same at each scrape. wq.Queues sorts by name only, and
	// queues of one name come in a map's order.
	type keyed struct {
		q                  *wq.Workqueue
		st                 wq.QueueStats
		typ, policy, flags string
	}
	ks := make([]keyed, 0, len(now))
	for _, q := range live {
		if _, ok := now[q]; ok {
			st := q.Stats()
			ks = append(ks, keyed{q: q, st: st, typ: queueType(q), policy: st.Policy.String(), flags: q.Flags().String()})
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		return cmp.Or(cmp.Compare(a.q.Name(), b.q.Name()), cmp.Compare(a.typ, b.typ),
			cmp.Compare(a.policy, b.policy), cmp.Compare(a.flags, b.flags))
	})
	for _, k := range ks {
		q, st := k.q, k.st
		run := q.Running()
		if s := byName[q.Name()]; s != nil {
			s.st = mergeStats(s.st, st)
			s.run = mergeRunning(s.run, run)
			s.maxActive += q.MaxActive()
			continue
		}
		f := q.Flags()
		s := &queueSample{name: q.Name(), typ: k.typ, policy: k.policy, flags: k.flags,
			unbound: f&wq.Unbound != 0, memReclaim: f&wq.MemReclaim != 0, maxActive: q.MaxActive(), st: st, run: run}
		byName[s.name] = s
		out = append(out, s)
	}
	for _, s := range out {
		if g, ok := c.gone[s.name]; ok {
			s.st = mergeCounters(s.st, g)
		}
	}
	return out
}

// mergeCounters adds b's counters (not its gauges: Infl, Pending) to a's.
func mergeCounters(a, b wq.QueueStats) wq.QueueStats {
	b.Infl, b.Pending, b.EscapeAfter = 0, 0, 0
	return mergeStats(a, b)
}

func mergeStats(a, b wq.QueueStats) wq.QueueStats {
	a.Total += b.Total
	a.Infl += b.Infl
	a.CPUTime += b.CPUTime
	a.CPUItsv += b.CPUItsv
	a.CMW += b.CMW
	a.RPR += b.RPR
	a.Mayday += b.Mayday
	a.Rescued += b.Rescued
	a.ESC += b.ESC
	a.EscapeAfter = max(a.EscapeAfter, b.EscapeAfter)
	a.Panics += b.Panics
	a.Pending += b.Pending
	a.Adds += b.Adds
	a.Latency = mergeHist(a.Latency, b.Latency)
	a.Exec = mergeHist(a.Exec, b.Exec)
	a.PWait = mergeHist(a.PWait, b.PWait)
	return a
}

// mergeHist returns the sum of two histogram snapshots: counts and sums
// added, the larger max, buckets with equal lower bounds added. It does not
// modify its arguments.
func mergeHist(a, b wq.HistSnapshot) wq.HistSnapshot {
	m := map[int64]int64{}
	for _, x := range a.Buckets {
		m[x.LowerNs] += x.Count
	}
	for _, x := range b.Buckets {
		m[x.LowerNs] += x.Count
	}
	out := wq.HistSnapshot{Count: a.Count + b.Count, SumNs: a.SumNs + b.SumNs, MaxNs: max(a.MaxNs, b.MaxNs)}
	for lo, n := range m {
		out.Buckets = append(out.Buckets, wq.HistBucket{LowerNs: lo, Count: n})
	}
	sort.Slice(out.Buckets, func(i, j int) bool { return out.Buckets[i].LowerNs < out.Buckets[j].LowerNs })
	return out
}

// Collect sends the current value of every metric. It implements
// prometheus.Collector; see Collector for its cost.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// NewConstMetric fails for label values that are not valid UTF-8 (a
	// queue name may be any string): the registry then reports the invalid
	// metric instead of the process panicking.
	send := func(d *prometheus.Desc, t prometheus.ValueType, v float64, lv []string) {
		m, err := prometheus.NewConstMetric(d, t, v, lv...)
		if err != nil {
			m = prometheus.NewInvalidMetric(d, err)
		}
		ch <- m
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) { send(d, prometheus.CounterValue, v, lv) }
	gauge := func(d *prometheus.Desc, v float64, lv ...string) { send(d, prometheus.GaugeValue, v, lv) }
	for _, s := range c.sampleQueues() {
		st := &s.st
		n := s.name
		gauge(c.info, 1, n, s.typ, s.policy, s.flags)
		gauge(c.maxActive, float64(s.maxActive), n)
		counter(c.started, float64(st.Total), n)
		counter(c.completed, float64(st.Total-st.Infl), n)
		gauge(c.inFlight, float64(max(st.Infl, 0)), n)
		counter(c.cpuSeconds, st.CPUTime.Seconds(), n)
		if s.unbound {
			counter(c.repatriations, float64(st.RPR), n)
		} else {
			counter(c.cpuIntensive, float64(st.CPUItsv), n)
			counter(c.cmWakeups, float64(st.CMW), n)
		}
		if s.memReclaim {
			counter(c.mayday, float64(st.Mayday), n)
			counter(c.rescued, float64(st.Rescued), n)
		}
		if !s.unbound && (st.EscapeAfter > 0 || st.ESC > 0) {
			counter(c.escapes, float64(st.ESC), n)
		}
		counter(c.panics, float64(st.Panics), n)
		ch <- c.histogram(c.queueDuration, st.Latency, n)
		ch <- c.histogram(c.workDuration, st.Exec, n)
		ch <- c.histogram(c.pwaitDuration, st.PWait, n)
		c.collectBacklog(gauge, counter, s)
		if c.clientGo != nil {
			c.clientGo.collect(gauge, counter, histogramWith, ch, s)
		}
	}
	for _, p := range wq.Pools() {
		cpu := ""
		if p.CPU >= 0 {
			cpu = strconv.Itoa(p.CPU)
		}
		lv := []string{strconv.Itoa(p.ID), cpu, p.CPUs, p.Policy, strconv.Itoa(p.Nice)}
		var longest float64
		for _, w := range p.Workers {
			if !w.Idle {
				longest = max(longest, w.Running.Seconds())
			}
		}
		gauge(c.poolWorkers, float64(len(p.Workers)), lv...)
		gauge(c.poolIdle, float64(p.Idle), lv...)
		gauge(c.poolPending, float64(p.Pending), lv...)
		gauge(c.poolMaxRunning, longest, lv...)
	}
}

// histogram converts a snapshot into a constant Prometheus histogram with
// the Collector's bounds; an impossible conversion yields an invalid
// metric (reported by the registry), never a panic.
func (c *Collector) histogram(d *prometheus.Desc, h wq.HistSnapshot, lv ...string) prometheus.Metric {
	return histogramWith(d, h, c.boundsNs, c.boundsS, lv...)
}

// histogramWith is histogram with the bounds given: boundsNs in ns,
// boundsS the same in seconds.
func histogramWith(d *prometheus.Desc, h wq.HistSnapshot, boundsNs []int64, boundsS []float64, lv ...string) prometheus.Metric {
	cum := cumulativeBuckets(h, boundsNs)
	buckets := make(map[float64]uint64, len(cum))
	for i, n := range cum {
		buckets[boundsS[i]] = n
	}
	m, err := prometheus.NewConstHistogram(d, uint64(max(h.Count, 0)), float64(h.SumNs)/1e9, buckets, lv...)
	if err != nil {
		return prometheus.NewInvalidMetric(d, err)
	}
	return m
}

// cumulativeBuckets returns, for each bound in boundsNs (ns, increasing),
// the number of observations of h in snapshot buckets whose lower bound is
// below the bound: Prometheus's cumulative bucket counts. When each bound
// is a bucket boundary of h (as the powers of two are), the counts are
// exactly the observations < bound. The result has len(boundsNs) entries
// and never exceeds h.Count.
func cumulativeBuckets(h wq.HistSnapshot, boundsNs []int64) []uint64 {
	out := make([]uint64, len(boundsNs))
	var acc int64
	j := 0
	for i, b := range boundsNs {
		for j < len(h.Buckets) && h.Buckets[j].LowerNs < b {
			acc += h.Buckets[j].Count
			j++
		}
		out[i] = uint64(max(min(acc, h.Count), 0))
	}
	return out
}
