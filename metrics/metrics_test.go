package metrics_test

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/gowq/wq"
	"github.com/gowq/wq/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func alloc(t *testing.T, name string, flags wq.Flags) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, 0)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", name, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

func only(names ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range names {
			if n == x {
				return true
			}
		}
		return false
	}
}

func newCollector(t *testing.T, opts metrics.Options) *metrics.Collector {
	t.Helper()
	c, err := metrics.NewCollector(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run queues n distinct items running fn on q and waits for them.
func run(q *wq.Workqueue, n int, fn func()) {
	for range n {
		q.Queue(wq.NewWork(fn))
	}
	q.Flush()
}

func sleep1ms() { time.Sleep(time.Millisecond) }

// TestCollectorRealWorkload runs a known workload and checks the exported
// counters exactly, the histograms against what must hold, and the lint.
func TestCollectorRealWorkload(t *testing.T) {
	pc := alloc(t, "mt_percpu", wq.PerCPU)
	ub := alloc(t, "mt_unbound", wq.Unbound|wq.MemReclaim)
	run(pc, 10, sleep1ms)
	run(ub, 7, func() {})
	c := newCollector(t, metrics.Options{Workqueues: only("mt_percpu", "mt_unbound")})

	want := `
# HELP gowq_workqueue_items_started_total Work items started (wq_monitor total).
# TYPE gowq_workqueue_items_started_total counter
gowq_workqueue_items_started_total{workqueue="mt_percpu"} 10
gowq_workqueue_items_started_total{workqueue="mt_unbound"} 7
# HELP gowq_workqueue_items_in_flight Work items started and not yet completed (wq_monitor infl).
# TYPE gowq_workqueue_items_in_flight gauge
gowq_workqueue_items_in_flight{workqueue="mt_percpu"} 0
gowq_workqueue_items_in_flight{workqueue="mt_unbound"} 0
# HELP gowq_workqueue_items_completed_total Work items whose function returned (or panicked).
# TYPE gowq_workqueue_items_completed_total counter
gowq_workqueue_items_completed_total{workqueue="mt_percpu"} 10
gowq_workqueue_items_completed_total{workqueue="mt_unbound"} 7
# HELP gowq_workqueue_info Workqueue description; always 1. type is percpu, unbound or ordered; policy is the worker class (normal, highpri, fifo).
# TYPE gowq_workqueue_info gauge
gowq_workqueue_info{flags="PERCPU",policy="normal",type="percpu",workqueue="mt_percpu"} 1
gowq_workqueue_info{flags="UNBOUND|MEM_RECLAIM",policy="normal",type="unbound",workqueue="mt_unbound"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"gowq_workqueue_items_started_total", "gowq_workqueue_items_in_flight",
		"gowq_workqueue_items_completed_total", "gowq_workqueue_info"); err != nil {
		t.Error(err)
	}

	// Per-CPU-only and unbound-only counters follow wq_monitor's "-".
	for name, want := range map[string]int{
		"gowq_workqueue_cm_wakeups_total":               1, // mt_percpu only
		"gowq_workqueue_cpu_intensive_violations_total": 1,
		"gowq_workqueue_repatriations_total":            1, // mt_unbound only
		"gowq_workqueue_mayday_total":                   1, // MemReclaim only
		"gowq_workqueue_rescued_total":                  1,
		"gowq_workqueue_cpu_seconds_total":              2,
		"gowq_workqueue_panics_total":                   2,
		"gowq_workqueue_queue_duration_seconds":         2,
		"gowq_workqueue_work_duration_seconds":          2,
		"gowq_workqueue_p_wait_seconds":                 2,
	} {
		if got := testutil.CollectAndCount(c, name); got != want {
			t.Errorf("CollectAndCount(%s) = %d, want %d", name, got, want)
		}
	}
	if n := testutil.CollectAndCount(c, "gowq_pool_workers"); n < 2 {
		t.Errorf("gowq_pool_workers has %d series, want >= 2 (a per-CPU and an unbound pool)", n)
	}

	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}

	// Histograms, read through a pedantic registry (which also checks
	// that the descriptors and the metrics agree).
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exec := findHist(t, mfs, "gowq_workqueue_work_duration_seconds", "mt_percpu")
	if exec.GetSampleCount() != 10 {
		t.Errorf("work duration count = %d, want 10", exec.GetSampleCount())
	}
	// Each item slept at least 1 ms.
	if exec.GetSampleSum() < 0.010 {
		t.Errorf("work duration sum = %v s, want >= 0.010 (10 items sleeping 1 ms)", exec.GetSampleSum())
	}
	checkBuckets(t, exec)
	for _, b := range exec.GetBucket() {
		if b.GetUpperBound() < 0.001 && b.GetCumulativeCount() != 0 {
			t.Errorf("bucket le=%v counts %d items, but every item ran >= 1 ms", b.GetUpperBound(), b.GetCumulativeCount())
		}
		if b.GetUpperBound() >= 60 && b.GetCumulativeCount() != 10 {
			t.Errorf("bucket le=%v counts %d items, want all 10", b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	lat := findHist(t, mfs, "gowq_workqueue_queue_duration_seconds", "mt_unbound")
	if lat.GetSampleCount() != 7 {
		t.Errorf("queue duration count = %d, want 7", lat.GetSampleCount())
	}
	checkBuckets(t, lat)

	// Pool gauges are consistent.
	for _, mf := range mfs {
		if mf.GetName() != "gowq_pool_idle_workers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetGauge().GetValue() < 0 {
				t.Errorf("idle workers < 0: %v", m)
			}
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for _, l := range []string{"pool", "cpus", "policy", "nice"} {
				if labels[l] == "" {
					t.Errorf("pool metric without %s label: %v", l, labels)
				}
			}
		}
	}
}

func findHist(t *testing.T, mfs []*dto.MetricFamily, name, queue string) *dto.Histogram {
	t.Helper()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "workqueue" && lp.GetValue() == queue {
					return m.GetHistogram()
				}
			}
		}
	}
	t.Fatalf("no %s{workqueue=%q}", name, queue)
	return nil
}

// checkBuckets checks that h has the default bounds with cumulative,
// non-decreasing counts not above the sample count.
func checkBuckets(t *testing.T, h *dto.Histogram) {
	t.Helper()
	bs := h.GetBucket()
	def := metrics.DefaultBuckets()
	if len(bs) != len(def) {
		t.Fatalf("%d buckets, want %d", len(bs), len(def))
	}
	var prev uint64
	for i, b := range bs {
		if b.GetUpperBound() != def[i] {
			t.Errorf("bucket %d bound %v, want %v", i, b.GetUpperBound(), def[i])
		}
		if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > h.GetSampleCount() {
			t.Errorf("bucket %d count %d after %d (total %d): not cumulative", i, b.GetCumulativeCount(), prev, h.GetSampleCount())
		}
		prev = b.GetCumulativeCount()
	}
}

// TestSameNameMerged: two live queues with one name give one series with
// their sum, so the registry accepts the scrape.
func TestSameNameMerged(t *testing.T) {
	a := alloc(t, "mt_dup", wq.PerCPU)
	b := alloc(t, "mt_dup", wq.PerCPU)
	run(a, 3, func() {})
	run(b, 4, func() {})
	c := newCollector(t, metrics.Options{Workqueues: only("mt_dup")})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err != nil {
		t.Fatalf("Gather: %v", err)
	}
	want := `
# HELP gowq_workqueue_items_started_total Work items started (wq_monitor total).
# TYPE gowq_workqueue_items_started_total counter
gowq_workqueue_items_started_total{workqueue="mt_dup"} 7
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gowq_workqueue_items_started_total"); err != nil {
		t.Error(err)
	}
	lat := newHistFrom(t, reg, "gowq_workqueue_queue_duration_seconds", "mt_dup")
	if lat.GetSampleCount() != 7 {
		t.Errorf("merged histogram count %d, want 7", lat.GetSampleCount())
	}
}

func newHistFrom(t *testing.T, reg *prometheus.Registry, name, queue string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return findHist(t, mfs, name, queue)
}

// TestBadLabelValueNoPanic: a queue name that is not UTF-8 makes the
// scrape report an error for that metric, never a panic, and the other
// queues are still exported.
func TestBadLabelValueNoPanic(t *testing.T) {
	alloc(t, "mt_bad\xff", wq.PerCPU)
	good := alloc(t, "mt_good", wq.PerCPU)
	run(good, 2, func() {})
	c := newCollector(t, metrics.Options{Workqueues: only("mt_bad\xff", "mt_good")})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err == nil {
		t.Error("Gather: no error for a non-UTF-8 label value")
	}
	if h := findHist(t, mfs, "gowq_workqueue_queue_duration_seconds", "mt_good"); h.GetSampleCount() != 2 {
		t.Errorf("good queue count %d, want 2", h.GetSampleCount())
	}
}

func TestNewCollectorErrors(t *testing.T) {
	for _, o := range []metrics.Options{
		{Namespace: "bad-name"},
		{Namespace: "1x"},
		{Buckets: []float64{0.1, 0.1}},
		{Buckets: []float64{0.2, 0.1}},
		{Buckets: []float64{-1}},
		{Buckets: []float64{0}},
		{Buckets: []float64{math.NaN()}},
		{Buckets: []float64{math.Inf(1)}},
		{Buckets: []float64{1e300}},
	} {
		if _, err := metrics.NewCollector(o); !errors.Is(err, metrics.ErrInvalidOptions) {
			t.Errorf("NewCollector(%+v) err = %v, want ErrInvalidOptions", o, err)
		}
	}
	a := alloc(t, "mt_ns", wq.PerCPU)
	run(a, 1, func() {})
	c2 := newCollector(t, metrics.Options{Namespace: "myapp", Buckets: []float64{0.001, 1}, Workqueues: only("mt_ns")})
	if n := testutil.CollectAndCount(c2, "myapp_workqueue_items_started_total"); n != 1 {
		t.Errorf("custom namespace: %d series, want 1", n)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c2)
	h := newHistFrom(t, reg, "myapp_workqueue_queue_duration_seconds", "mt_ns")
	if len(h.GetBucket()) != 2 {
		t.Errorf("custom buckets: got %d, want 2", len(h.GetBucket()))
	}
}

// TestConcurrentScrapes scrapes while work runs (for the race detector).
func TestConcurrentScrapes(t *testing.T) {
	q := alloc(t, "mt_conc", wq.Unbound)
	c := newCollector(t, metrics.Options{Workqueues: only("mt_conc")})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if testutil.CollectAndCount(c) == 0 {
					t.Error("empty scrape")
					return
				}
			}
		}()
	}
	run(q, 200, func() {})
	close(stop)
	wg.Wait()
}

// escapes_total (ESC) is exported for per-CPU queues with escape_after,
// and only for them.
func TestCollectorEscapes(t *testing.T) {
	plain := alloc(t, "mt_esc_plain", wq.PerCPU)
	esc := alloc(t, "mt_esc_on", wq.PerCPU)
	if err := esc.SetEscapeAfter(time.Second); err != nil {
		t.Fatal(err)
	}
	run(plain, 3, func() {})
	run(esc, 3, func() {})
	c := newCollector(t, metrics.Options{Workqueues: only("mt_esc_plain", "mt_esc_on")})
	want := `
# HELP gowq_workqueue_escapes_total Items of this per-CPU workqueue run on another CPU because no worker of their CPU started them within escape_after (ESC; a gowq extension).
# TYPE gowq_workqueue_escapes_total counter
gowq_workqueue_escapes_total{workqueue="mt_esc_on"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "gowq_workqueue_escapes_total"); err != nil {
		t.Error(err)
	}
}

// counterValues gathers reg and returns every counter and histogram count
// by series (metric name and labels).
func counterValues(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// Destroying one of two queues that share a name keeps the name's
// counters: the series does not go down (read as a counter reset by
// rate()). Fell from 20 to 10 when only live queues were summed.
func TestSameNameDestroyKeepsCounters(t *testing.T) {
	a := alloc(t, "mt_keep", wq.Unbound)
	b, err := wq.Alloc("mt_keep", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	run(a, 10, func() {})
	run(b, 10, func() {})
	c := newCollector(t, metrics.Options{Workqueues: only("mt_keep")})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	before := counterValues(t, reg)
	b.Destroy()
	after := counterValues(t, reg)
	for _, name := range []string{"gowq_workqueue_items_started_total", "gowq_workqueue_adds_total"} {
		key := name + ",workqueue=mt_keep"
		if before[key] != 20 || after[key] != 20 {
			t.Errorf("%s: %v before the Destroy of one queue, %v after; want 20 and 20", name, before[key], after[key])
		}
	}
	run(a, 1, func() {})
	if v := counterValues(t, reg)["gowq_workqueue_items_started_total,workqueue=mt_keep"]; v != 21 {
		t.Errorf("items_started_total = %v after one more item, want 21", v)
	}
}

// No exported counter ever decreases between two scrapes, while queues
// of one name are allocated and destroyed, items run, are cancelled and
// the queues' attributes change.
func TestCountersMonotonicUnderScrapes(t *testing.T) {
	c := newCollector(t, metrics.Options{Workqueues: only("mt_mono")})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				q, err := wq.Alloc("mt_mono", wq.Unbound, 2)
				if err != nil {
					t.Error(err)
					return
				}
				ws := make([]*wq.Work, 16)
				for i := range ws {
					ws[i] = wq.NewWork(func() {})
					q.Queue(ws[i])
				}
				ws[0].Cancel()
				_ = q.SetNice((round + g) % 2)
				run(q, 8, func() {})
				q.Destroy()
			}
		}()
	}
	prev := counterValues(t, reg)
	for range 200 {
		cur := counterValues(t, reg)
		for k, v := range cur {
			if p, ok := prev[k]; ok && v < p {
				t.Errorf("%s went down: %v -> %v", k, p, v)
			}
		}
		for k, v := range prev {
			if _, ok := cur[k]; !ok {
				cur[k] = v // a name with no live queue for a moment
			}
		}
		prev = cur
	}
	close(stop)
	wg.Wait()
}

// TestSameNameLabelsDeterministic: when queues of different types share a
// name, every scrape exports the same info labels and the same counter
// families for it, whatever order the queues were created in (catches
// labels taken from the first queue of the name in wq.Queues' order,
// which sorts by name only over a map's order: with a per-CPU and an
// unbound queue named alike, scrapes flipped between type="percpu" with
// the CM counters and type="unbound" with repatriations).
func TestSameNameLabelsDeterministic(t *testing.T) {
	scrape := func() string {
		c := newCollector(t, metrics.Options{Workqueues: only("mt_mixed")})
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("Gather: %v", err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			if strings.HasSuffix(mf.GetName(), "_info") {
				for _, m := range mf.GetMetric() {
					for _, l := range m.GetLabel() {
						b.WriteString(l.GetName() + "=" + l.GetValue() + " ")
					}
				}
			}
			b.WriteString(mf.GetName() + "\n")
		}
		return b.String()
	}
	seen := map[string]int{}
	for _, order := range [][]wq.Flags{{wq.PerCPU, wq.Unbound}, {wq.Unbound, wq.PerCPU}} {
		var qs []*wq.Workqueue
		for _, f := range order {
			q, err := wq.Alloc("mt_mixed", f, 0)
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q)
		}
		for range 50 {
			seen[scrape()]++
		}
		for _, q := range qs {
			q.Destroy()
		}
	}
	if len(seen) != 1 {
		for s, n := range seen {
			t.Errorf("%d of 100 scrapes:\n%s", n, s)
		}
	}
}
