package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gowq/wq"
	"github.com/gowq/wq/metrics"
)

// valuesOf gathers c once and returns, by metric name, the values of the
// gauges and counters of workqueue q.
func valuesOf(t *testing.T, c *metrics.Collector, q string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if labelOf(m, "workqueue") != q {
				continue
			}
			switch {
			case m.Gauge != nil:
				out[mf.GetName()] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[mf.GetName()] = m.Counter.GetValue()
			}
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestClientGoBacklogMetrics: depth, adds, unfinished work and longest
// running follow client-go's meaning on a queue with one running item
// and a backlog.
func TestClientGoBacklogMetrics(t *testing.T) {
	// Catches a depth that counts running items, adds that miss the
	// backlog, or running-time gauges that ignore the running item.
	q, err := wq.Alloc("mt_backlog", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	started, release := make(chan struct{}), make(chan struct{})
	q.Queue(wq.NewWork(func() { close(started); <-release }))
	<-started
	for range 4 {
		q.Queue(wq.NewWork(func() {}))
	}
	q.QueueKeyed(1, wq.NewWork(func() {}))
	q.QueueKeyed(1, wq.NewWork(func() {})) // chained
	time.Sleep(5 * time.Millisecond)
	c := newCollector(t, metrics.Options{Workqueues: only("mt_backlog")})
	v := valuesOf(t, c, "mt_backlog")
	if d := v["gowq_workqueue_depth"]; d != 6 {
		t.Errorf("depth = %v, want 6 (4 inactive, 1 keyed queued, 1 chained; not the running one)", d)
	}
	if a := v["gowq_workqueue_adds_total"]; a != 6 {
		t.Errorf("adds_total = %v, want 6 (the chained item is added when it reaches the queue)", a)
	}
	u, l := v["gowq_workqueue_unfinished_work_seconds"], v["gowq_workqueue_longest_running_processor_seconds"]
	if l < 0.005 || u != l {
		t.Errorf("unfinished = %v s, longest = %v s; want longest >= 5 ms, and equal with one item running", u, l)
	}
	close(release)
	q.Flush()
	v = valuesOf(t, c, "mt_backlog")
	if d := v["gowq_workqueue_depth"]; d != 0 {
		t.Errorf("depth after Flush = %v", d)
	}
	if a := v["gowq_workqueue_adds_total"]; a != 7 {
		t.Errorf("adds_total after Flush = %v, want 7", a)
	}
	if l, u := v["gowq_workqueue_longest_running_processor_seconds"], v["gowq_workqueue_unfinished_work_seconds"]; l != 0 || u != 0 {
		t.Errorf("with nothing running: longest %v, unfinished %v", l, u)
	}
}
