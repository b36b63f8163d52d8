package wq_test

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/wqtrace"
)

// TestObsCountersKnownWorkload: N items give total N, infl 0 after Flush,
// and N observations in both histograms, on per-CPU and unbound queues.
func TestObsCountersKnownWorkload(t *testing.T) {
	const n = 50
	for _, f := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q := mustAlloc(t, "obs_count", f, 0)
		var ran atomic.Int64
		for range n {
			if !q.Queue(wq.NewWork(func() { ran.Add(1) })) {
				t.Fatal("Queue of a fresh item returned false")
			}
		}
		q.Flush()
		st := q.Stats()
		if st.Name != "obs_count" || st.Flags != q.Flags() || st.Policy != wq.PolicyNormal {
			t.Errorf("%v: identity %q %v %v", f, st.Name, st.Flags, st.Policy)
		}
		if st.Total != n || st.Infl != 0 || ran.Load() != n {
			t.Errorf("%v: total %d infl %d (ran %d), want total %d infl 0", f, st.Total, st.Infl, ran.Load(), n)
		}
		if st.Latency.Count != n || st.Exec.Count != n {
			t.Errorf("%v: histogram counts %d/%d, want %d", f, st.Latency.Count, st.Exec.Count, n)
		}
		var sum int64
		for _, b := range st.Exec.Buckets {
			sum += b.Count
		}
		if sum != n || st.Exec.Quantile(0.5) > st.Exec.MaxNs {
			t.Errorf("%v: exec buckets sum %d, p50 %d > max %d", f, sum, st.Exec.Quantile(0.5), st.Exec.MaxNs)
		}
		if st.Panics != 0 || st.Mayday != 0 || st.Rescued != 0 {
			t.Errorf("%v: unexpected panics/mayday/rescued %+v", f, st)
		}
	}
}

// TestObsInFlight: infl counts an item while it runs.
func TestObsInFlight(t *testing.T) {
	q := mustAlloc(t, "obs_infl", wq.Unbound, 0)
	release := make(chan struct{})
	w := wq.NewWork(func() { <-release })
	q.Queue(w)
	waitFor(t, "the item to start", func() bool { return w.Busy()&wq.BusyRunning != 0 })
	if st := q.Stats(); st.Total != 1 || st.Infl != 1 {
		t.Errorf("while running: total %d infl %d, want 1 and 1", st.Total, st.Infl)
	}
	close(release)
	q.Flush()
	if st := q.Stats(); st.Infl != 0 {
		t.Errorf("after flush: infl %d", st.Infl)
	}
}

// TestObsCMWakeup: a sleeping item on a per-CPU queue with another item
// queued behind it on the same CPU makes the pool wake another worker.
func TestObsCMWakeup(t *testing.T) {
	q := mustAlloc(t, "obs_cmw", wq.PerCPU, 0)
	release := make(chan struct{})
	var second atomic.Bool
	sleeper := wq.NewWork(func() { <-release })
	q.QueueOn(0, sleeper)
	waitFor(t, "the sleeper to start", func() bool { return sleeper.Busy()&wq.BusyRunning != 0 })
	q.QueueOn(0, wq.NewWork(func() { second.Store(true) }))
	waitFor(t, "the second item to start while the first sleeps", second.Load)
	close(release)
	q.Flush()
	st := q.Stats()
	if st.CMW < 1 {
		t.Errorf("CMW = %d, want >= 1", st.CMW)
	}
	if st.CPUItsv != 0 {
		t.Errorf("CPUitsv = %d for a sleeping item, want 0", st.CPUItsv)
	}
	if st.Total != 2 || st.Infl != 0 {
		t.Errorf("total %d infl %d", st.Total, st.Infl)
	}
}

// TestObsCPUIntensiveAndCPUTime: an item that burns 20 ms of CPU on a
// per-CPU queue is one CPU-intensive violation, and its CPU time is
// counted.
func TestObsCPUIntensiveAndCPUTime(t *testing.T) {
	obsCPUIntensiveThresh(t, 10*time.Millisecond)
	labsys.SetCPUAccounting(true) // the default
	q := mustAlloc(t, "obs_cpuitsv", wq.PerCPU, 0)
	// Spin until the monitor has marked the item CPU-intensive (it samples
	// every 1 ms but may be late on a loaded machine), for at most 5 s of
	// CPU; at least 20 ms.
	q.QueueOn(0, wq.NewWork(func() {
		obsSpinCPU(t, 20*time.Millisecond)
		for i := 0; i < 5000 && q.Stats().CPUItsv == 0; i++ {
			obsSpinCPU(t, time.Millisecond)
		}
	}))
	q.Flush()
	st := q.Stats()
	if st.CPUItsv != 1 {
		t.Errorf("CPUitsv = %d, want 1", st.CPUItsv)
	}
	// The spinner used at least 20 ms of its thread's CPU; the accounting
	// reads the same clock. 10 ms leaves room for any rounding.
	if st.CPUTime < 10*time.Millisecond {
		t.Errorf("CPUtime = %v, want >= 10ms", st.CPUTime)
	}
	if st.Exec.MaxNs < int64(10*time.Millisecond) {
		t.Errorf("execution time max %d ns, want >= 10 ms", st.Exec.MaxNs)
	}
}

// TestObsAttrs: invalid values give ErrInvalidArgument and change nothing;
// max_active can be written; read-only attributes give ErrReadOnly.
func TestObsAttrs(t *testing.T) {
	pc := mustAlloc(t, "obs_attrs_pc", wq.PerCPU|wq.Sysfs, 16)
	ub := mustAlloc(t, "obs_attrs_ub", wq.Unbound|wq.Sysfs, 0)

	if err := pc.SetAttr("max_active", " 7\n"); err != nil {
		t.Fatalf("SetAttr(max_active, 7): %v", err)
	}
	if v, _ := pc.Attr("max_active"); v != "7" || pc.MaxActive() != 7 {
		t.Errorf("max_active %q / %d after SetAttr 7", v, pc.MaxActive())
	}
	snapshot := func(q *wq.Workqueue) map[string]string {
		m := map[string]string{}
		for _, n := range q.AttrNames() {
			v, err := q.Attr(n)
			if err != nil {
				t.Fatalf("Attr(%s): %v", n, err)
			}
			m[n] = v
		}
		return m
	}
	for _, c := range []struct {
		q           *wq.Workqueue
		name, value string
	}{
		{pc, "max_active", "abc"}, {pc, "max_active", "0"}, {pc, "max_active", "2049"}, {pc, "max_active", ""},
		{pc, "policy", "realtime"}, {pc, "nice", "0"}, {pc, "no_such", "1"},
		{ub, "nice", "20"}, {ub, "nice", "x"}, {ub, "cpumask", "zz"}, {ub, "cpumask", "0"},
		{ub, "affinity_scope", "galaxy"}, {ub, "affinity_strict", "yes"},
	} {
		before := snapshot(c.q)
		err := c.q.SetAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s.SetAttr(%s, %q) = %v, want ErrInvalidArgument", c.q.Name(), c.name, c.value, err)
		}
		if after := snapshot(c.q); !mapsEqual(before, after) {
			t.Errorf("%s.SetAttr(%s, %q) failed but changed %v -> %v", c.q.Name(), c.name, c.value, before, after)
		}
	}
	for _, q := range []*wq.Workqueue{pc, ub} {
		if err := q.SetAttr("per_cpu", "1"); !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("%s per_cpu write: %v, want ErrReadOnly", q.Name(), err)
		}
	}
	if _, err := pc.Attr("cpumask"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("per-CPU queue Attr(cpumask) = %v, want ErrInvalidArgument", err)
	}
	// Valid unbound writes take effect.
	nice := strconv.Itoa(max(reachableNice(t, 5), 5))
	for name, value := range map[string]string{"affinity_scope": "system", "affinity_strict": "1", "nice": nice} {
		if err := ub.SetAttr(name, value); err != nil {
			t.Errorf("SetAttr(%s, %s): %v", name, value, err)
		} else if v, _ := ub.Attr(name); v != value {
			t.Errorf("Attr(%s) = %q after writing %q", name, v, value)
		}
	}
	run := func(q *wq.Workqueue) {
		var ran atomic.Bool
		q.Queue(wq.NewWork(func() { ran.Store(true) }))
		q.Flush()
		if !ran.Load() {
			t.Errorf("%s: item did not run after attribute changes", q.Name())
		}
	}
	run(pc)
	run(ub)

	// Globals.
	for name, value := range map[string]string{"cpu_intensive_thresh_us": "-1", "watchdog_thresh": "x",
		"default_affinity_scope": "galaxy", "power_efficient": "maybe", "no_such": "1"} {
		old, _ := wq.GlobalAttr(name)
		if err := wq.SetGlobalAttr(name, value); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(%s, %q) = %v, want ErrInvalidArgument", name, value, err)
		}
		if now, _ := wq.GlobalAttr(name); now != old {
			t.Errorf("failed SetGlobalAttr(%s) changed %q -> %q", name, old, now)
		}
	}
	obsCPUIntensiveThresh(t, wq.CPUIntensiveThresh()) // restores it after
	if err := wq.SetGlobalAttr("cpu_intensive_thresh_us", "12000"); err != nil || wq.CPUIntensiveThresh() != 12*time.Millisecond {
		t.Errorf("SetGlobalAttr(cpu_intensive_thresh_us, 12000): %v, now %v", err, wq.CPUIntensiveThresh())
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestObsAttrsRT: an RT queue's nice, affinity_scope, affinity_strict and
// policy are read-only; max_active stays writable.
func TestObsAttrsRT(t *testing.T) {
	q, err := wq.Alloc("obs_attrs_rt", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO (needs root or CAP_SYS_NICE and an RT budget)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	if v, _ := q.Attr("policy"); v != "fifo" {
		t.Errorf("RT policy %q, want fifo", v)
	}
	for name, value := range map[string]string{"nice": "5", "affinity_scope": "system", "affinity_strict": "0", "policy": "normal"} {
		before, _ := q.Attr(name)
		if err := q.SetAttr(name, value); !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("RT SetAttr(%s, %s) = %v, want ErrReadOnly", name, value, err)
		}
		if after, _ := q.Attr(name); after != before {
			t.Errorf("RT %s changed %q -> %q", name, before, after)
		}
	}
	if v, _ := q.Attr("affinity_scope"); v != "cpu" {
		t.Errorf("RT affinity_scope %q, want cpu", v)
	}
	if v, _ := q.Attr("affinity_strict"); v != "1" {
		t.Errorf("RT affinity_strict %q, want 1", v)
	}
	if err := q.SetAttr("max_active", "4"); err != nil || q.MaxActive() != 4 {
		t.Errorf("RT max_active write: %v, now %d", err, q.MaxActive())
	}
}

func obsTraced() {}

func workAddr(w *wq.Work) uintptr { return uintptr(unsafe.Pointer(w)) }

// TestObsFtraceRoundTrip: the ftrace text FtraceWriter writes for gowq's
// events parses back with wqtrace.Parse, the parser used for the kernel
// captures in testdata/ktrace, giving the four events of each item in
// order with the workqueue and function names.
func TestObsFtraceRoundTrip(t *testing.T) {
	const n = 8
	q := mustAlloc(t, "obs_trace", wq.PerCPU, 0)
	var buf bytes.Buffer
	fw := wqtrace.NewFtraceWriter(&buf)
	if err := fw.WriteHeader(wqtrace.Header{CPUs: runtime.NumCPU()}); err != nil {
		t.Fatal(err)
	}
	wq.SetTracer(fw)
	t.Cleanup(func() { wq.SetTracer(nil) })
	items := make([]*wq.Work, n)
	for i := range items {
		items[i] = wq.NewWork(obsTraced)
		if !q.QueueOn(0, items[i]) {
			t.Fatal("QueueOn returned false")
		}
	}
	q.Flush()
	wq.SetTracer(nil)
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}

	p := wqtrace.NewParser(bytes.NewReader(buf.Bytes()))
	p.Strict = true
	var evs []wqtrace.Event
	for p.Next() {
		evs = append(evs, p.Event())
	}
	if err := p.Err(); err != nil {
		t.Fatalf("strict parse of gowq's ftrace text: %v", err)
	}
	if st := p.Stats(); st.Comments == 0 || st.Malformed != 0 {
		t.Errorf("parse stats %+v: want the header as comments, nothing malformed", st)
	}
	fn := items[0].Func()
	if fn != "github.com/gowq/wq_test.obsTraced" {
		t.Errorf("Func() = %q", fn)
	}
	kinds := []wqtrace.Kind{wqtrace.QueueWork, wqtrace.ActivateWork, wqtrace.ExecuteStart, wqtrace.ExecuteEnd}
	for i, w := range items {
		var mine []wqtrace.Event
		for _, e := range evs {
			if e.Work == workAddr(w) {
				mine = append(mine, e)
			}
		}
		if len(mine) != 4 {
			t.Fatalf("item %d: %d events, want 4:\n%s", i, len(mine), buf.String())
		}
		for j, e := range mine {
			if e.Kind != kinds[j] {
				t.Errorf("item %d event %d is %v, want %v", i, j, e.Kind, kinds[j])
			}
			if e.Function != fn {
				t.Errorf("item %d %v: function %q, want %q", i, e.Kind, e.Function, fn)
			}
			if j > 0 && e.TimeNs < mine[j-1].TimeNs {
				t.Errorf("item %d: %v at %d before %v at %d", i, e.Kind, e.TimeNs, mine[j-1].Kind, mine[j-1].TimeNs)
			}
			if e.TID <= 0 {
				t.Errorf("item %d %v: tid %d", i, e.Kind, e.TID)
			}
		}
		qe, start, end := mine[0], mine[2], mine[3]
		if qe.Workqueue != "obs_trace" || qe.ReqCPU != 0 || qe.TargetCPU != 0 {
			t.Errorf("item %d queue_work: workqueue %q req_cpu %d cpu %d, want obs_trace 0 0", i, qe.Workqueue, qe.ReqCPU, qe.TargetCPU)
		}
		if start.TID != end.TID || start.CPU != 0 || !regexp.MustCompile(`^kworker/0:\d+$`).MatchString(start.Comm) {
			t.Errorf("item %d: start %+v end %+v: want one kworker/0:N thread on CPU 0", i, start, end)
		}
	}

	// The same parser reads the kernel's own capture.
	f, err := os.Open("testdata/ktrace/idle-plus-fsync.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kp := wqtrace.NewParser(f)
	nk := 0
	for kp.Next() {
		nk++
	}
	if kp.Err() != nil || nk == 0 || kp.Stats().ByKind[wqtrace.ExecuteStart] == 0 {
		t.Errorf("kernel capture: %d events, err %v, stats %+v", nk, kp.Err(), kp.Stats())
	}
}

type obsNopTracer struct{}

func (obsNopTracer) Trace(*wqtrace.Event) {}

func benchWithTracer(b *testing.B, tr wqtrace.Tracer) {
	if tr != nil {
		wq.SetTracer(tr)
		defer wq.SetTracer(nil)
	}
	b.Run("queue", func(b *testing.B) { benchQueueOnly(b) })
	b.Run("roundtrip", benchQueueRoundTrip)
}

// BenchmarkQueueNoTracer measures queueing with no tracer installed, where
// each tracepoint costs one atomic load and an untaken branch: the queue
// call alone (queue) and queue -> execute -> idle (roundtrip).
func BenchmarkQueueNoTracer(b *testing.B) { benchWithTracer(b, nil) }

// BenchmarkQueueWithTracer is BenchmarkQueueNoTracer with a no-op tracer
// installed: the events are built and passed to it.
func BenchmarkQueueWithTracer(b *testing.B) { benchWithTracer(b, obsNopTracer{}) }

// Stats after Destroy returns without a crash or a hang.
func TestStatsAfterDestroy(t *testing.T) {
	for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q, _ := wq.Alloc("statsdestroy", flags, 0)
		for i := 0; i < 5; i++ {
			w := wq.NewWork(func() {})
			q.Queue(w)
			w.Flush()
		}
		q.Destroy()
		if s := q.Stats(); s.Total != 5 {
			t.Errorf("%v: Stats().Total after Destroy = %d, want 5", flags, s.Total)
		}
	}
}

// waitCPUTime polls q's CPUTime until it is non-zero (the read at the
// worker's park), for at most 2 s.
func waitCPUTime(q *wq.Workqueue) time.Duration {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c := q.Stats().CPUTime; c > 0 {
			return c
		}
		time.Sleep(time.Millisecond)
	}
	return q.Stats().CPUTime
}

// TestCPUAccountingOffIsNotChargedLater: CPU used while accounting was off must
// not be charged, after labsys.SetCPUAccounting(true), to the next queue whose
// item the worker runs. (Failed before the fix: the whole burn of the
// first item, ~30 ms, went to the second queue's CPUTime.)
func TestCPUAccountingOffIsNotChargedLater(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	t.Cleanup(func() { labsys.SetCPUAccounting(true) })
	qa := mustAlloc(t, "acct_a", wq.PerCPU, 0)
	qb := mustAlloc(t, "acct_b", wq.PerCPU, 0)
	labsys.SetCPUAccounting(false)
	b := wq.NewWork(func() { labsys.SetCPUAccounting(true) })
	qa.QueueOn(0, wq.NewWork(func() {
		obsSpinCPU(t, 30*time.Millisecond)
		qb.QueueOn(0, b)
	}))
	qa.Flush()
	qb.Flush()
	if c := waitCPUTime(qb); c > 10*time.Millisecond {
		t.Errorf("queue b's item took microseconds, but its CPUTime is %v: the CPU burnt with accounting off was charged to it", c)
	}
}

// TestCPUAccountingOffStopsCharging: CPU used after labsys.SetCPUAccounting(false)
// must not be charged to the queue of the last item run with accounting on
// ("When off, CPUtime stays 0").
func TestCPUAccountingOffStopsCharging(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	labsys.SetCPUAccounting(true)
	t.Cleanup(func() { labsys.SetCPUAccounting(true) })
	qc := mustAlloc(t, "acct_c", wq.PerCPU, 0)
	qd := mustAlloc(t, "acct_d", wq.PerCPU, 0)
	d := wq.NewWork(func() {
		labsys.SetCPUAccounting(false)
		obsSpinCPU(t, 30*time.Millisecond)
	})
	qc.QueueOn(0, wq.NewWork(func() { qd.QueueOn(0, d) }))
	qc.Flush()
	qd.Flush()
	if c := waitCPUTime(qc); c > 10*time.Millisecond {
		t.Errorf("queue c's item took microseconds, but its CPUTime is %v: CPU burnt with accounting off was charged to it", c)
	}
	if c := qd.Stats().CPUTime; c > 10*time.Millisecond {
		t.Errorf("queue d ran with accounting off, CPUTime %v", c)
	}
}

// Stats is safe from every tracer event, also activate_work, which is
// delivered under the pool lock, while another goroutine changes the
// queue's attributes (which takes the queue's lock and then the pool
// locks). Deadlocked within a few flips when Stats took the queue's lock.
func TestStatsFromTracerUnderAttributeChanges(t *testing.T) {
	q := mustAlloc(t, "stats-tracer-attrs", wq.Unbound, 0, wq.Threads())
	nices := [2]int{0, reachableNice(t, 1)} // two classes, two pools
	var calls atomic.Int64
	wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
		if ev.Kind == wqtrace.ActivateWork && ev.Workqueue == q.Name() {
			_ = q.Stats()
			calls.Add(1)
		}
	}))
	t.Cleanup(func() { wq.SetTracer(nil) })
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := make([]*wq.Work, 16)
			for i := range ws {
				ws[i] = wq.NewWork(func() {})
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, w := range ws {
					q.Queue(w)
				}
				// Stats is slow under -race: leave the pool lock free
				// between bursts, so that a flip is slowed by nothing but
				// a deadlock.
				time.Sleep(100 * time.Microsecond)
			}
		}()
	}
	mustReturn(t, "attribute flips beside a tracer calling Stats", func() {
		// Flips for 2 s (at least 20): a deadlock came within a few; a
		// fixed number of flips would only measure the machine's speed.
		start := time.Now()
		for i := 0; i < 20 || time.Since(start) < 2*time.Second; i++ {
			if err := q.SetNice(nices[i%2]); err != nil {
				t.Errorf("SetNice(%d): %v", nices[i%2], err)
				break
			}
		}
	})
	close(stop)
	wg.Wait()
	wq.SetTracer(nil)
	if calls.Load() == 0 {
		t.Error("the tracer never ran: nothing was tested")
	}
}

// statsCounters lists the counters of Stats that must never decrease.
func statsCounters(s wq.QueueStats) map[string]int64 {
	return map[string]int64{
		"Total": s.Total, "CPUTime": int64(s.CPUTime), "CPUItsv": s.CPUItsv, "CMW": s.CMW, "RPR": s.RPR,
		"Mayday": s.Mayday, "Rescued": s.Rescued, "Panics": s.Panics, "Pushed": s.Pushed, "Bounced": s.Bounced,
		"ESC": s.ESC, "CreateErrors": s.CreateErrors, "Adds": s.Adds, "Latency.Count": s.Latency.Count,
		"Exec.Count": s.Exec.Count, "PWait.Count": s.PWait.Count,
	}
}

// monotonicScraper reads q.Stats in a loop until stop is closed and
// reports every counter that went down between two reads.
func monotonicScraper(t *testing.T, q *wq.Workqueue, stop <-chan struct{}) (wait func() int) {
	done := make(chan int)
	go func() {
		prev := statsCounters(q.Stats())
		n := 0
		for {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			cur := statsCounters(q.Stats())
			n++
			for k, v := range cur {
				if v < prev[k] {
					t.Errorf("Stats().%s went down: %d -> %d", k, prev[k], v)
				}
			}
			prev = cur
		}
	}()
	return func() int { return <-done }
}

// Every exported counter of Stats is monotonic while items are queued,
// started, cancelled and put back (a tracer's runtime.Goexit at
// execute_start), and while attribute changes retire pwqs. Adds dropped
// by one (it was summed from counters read one after the other) and
// Total dropped when an instance dequeued was put back.
func TestStatsCountersMonotonic(t *testing.T) {
	nices := [2]int{0, reachableNice(t, 1)}
	for _, opts := range [][]wq.Option{nil, {wq.Threads()}} {
		q := mustAlloc(t, "stats-monotonic", wq.Unbound, 4, opts...)
		stop := make(chan struct{})
		wait := monotonicScraper(t, q, stop)
		var gexit atomic.Int64
		wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
			// Every 7th start ends the worker's goroutine before the
			// instance runs: it goes back first in line.
			if ev.Kind == wqtrace.ExecuteStart && ev.Workqueue == q.Name() && gexit.Add(1)%7 == 0 {
				runtime.Goexit()
			}
		}))
		var wg sync.WaitGroup
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := make([]*wq.Work, 32)
				for i := range ws {
					ws[i] = wq.NewWork(func() {})
				}
				for round := range 200 {
					for _, w := range ws {
						q.Queue(w)
					}
					if round%5 == g {
						for _, w := range ws[:8] {
							w.Cancel()
						}
					}
					if g == 0 && round%20 == 0 {
						if err := q.SetNice(nices[round/20%2]); err != nil {
							t.Errorf("SetNice: %v", err)
						}
					}
				}
			}()
		}
		wg.Wait()
		wq.SetTracer(nil)
		q.Flush()
		close(stop)
		if n := wait(); n < 10 {
			t.Errorf("only %d reads of Stats: nothing was tested", n)
		}
	}
}

// CreateErrors keeps the failed worker creations of the pools that the
// queue stopped using, after an attribute change and after Destroy.
// Fell to 0 when the failing pool was released.
func TestCreateErrorsSurviveAttributeChange(t *testing.T) {
	var fail atomic.Bool
	wq.SetCreateWorkerHook(func() error {
		if fail.Load() {
			return errors.New("injected: no threads")
		}
		return nil
	})
	t.Cleanup(func() { wq.SetCreateWorkerHook(nil) })
	captureErrors(t)
	q, err := wq.Alloc("stats-create-errs", wq.Unbound|wq.MemReclaim, 0, wq.Threads())
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	w := wq.NewWork(func() {})
	q.Queue(w)
	waitFor(t, "a failed creation", func() bool { return q.Stats().CreateErrors > 0 })
	fail.Store(false)
	mustReturn(t, "Flush", func() { w.Flush() })
	before := q.Stats().CreateErrors
	if err := q.SetNice(reachableNice(t, 1)); err != nil {
		t.Fatal(err)
	}
	q.Queue(w)
	mustReturn(t, "Flush", func() { w.Flush() })
	if s := q.Stats(); s.CreateErrors < before || s.CreateError == "" {
		t.Errorf("after the attribute change: CreateErrors %d (was %d), CreateError %q", s.CreateErrors, before, s.CreateError)
	}
	q.Destroy()
	if s := q.Stats(); s.CreateErrors < before {
		t.Errorf("after Destroy: CreateErrors %d (was %d)", s.CreateErrors, before)
	}
}

// An instance put back by a runtime.Goexit in the tracer's execute_start
// (it never started) is counted once, when it starts: Latency.Count and
// Exec.Count equal Total. Its queue-to-start latency was observed at each
// dequeue, twice.
func TestStatsLatencyCountedOncePerStart(t *testing.T) {
	for _, opts := range [][]wq.Option{nil, {wq.Threads()}} {
		q := mustAlloc(t, "stats-latency-once", wq.Unbound, 0, opts...)
		var once atomic.Bool
		wq.SetTracer(tracerFunc(func(ev *wqtrace.Event) {
			if ev.Kind == wqtrace.ExecuteStart && ev.Workqueue == q.Name() && once.CompareAndSwap(false, true) {
				runtime.Goexit() // the instance goes back first in line
			}
		}))
		w := wq.NewWork(func() {})
		q.Queue(w)
		mustReturn(t, "Flush", func() { w.Flush() })
		wq.SetTracer(nil)
		if !once.Load() {
			t.Fatal("the tracer never ended a worker: nothing was tested")
		}
		s := q.Stats()
		if s.Total != 1 || s.Latency.Count != s.Total || s.Exec.Count != s.Total {
			t.Errorf("Total %d, Latency.Count %d, Exec.Count %d: want 1 each", s.Total, s.Latency.Count, s.Exec.Count)
		}
	}
}
