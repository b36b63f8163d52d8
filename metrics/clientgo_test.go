package metrics_test

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gowq/wq"
	"github.com/gowq/wq/metrics"
)

// clientGoDef is one line of testdata/client-go-workqueue-metrics.txt.
type clientGoDef struct {
	name, typ, help string
	labels          []string
	buckets         []float64 // nil for no histogram
}

func readClientGoDefs(t *testing.T) []clientGoDef {
	t.Helper()
	f, err := os.Open("testdata/client-go-workqueue-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var defs []clientGoDef
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		col := strings.Split(line, "\t")
		if len(col) != 5 {
			t.Fatalf("bad line %q", line)
		}
		d := clientGoDef{name: col[0], typ: col[1], labels: strings.Split(col[2], ","), help: col[4]}
		if col[3] != "-" {
			var start, factor float64
			var count int
			p := strings.Fields(col[3])
			if len(p) != 4 || p[0] != "exp" {
				t.Fatalf("bad buckets %q", col[3])
			}
			start, _ = strconv.ParseFloat(p[1], 64)
			factor, _ = strconv.ParseFloat(p[2], 64)
			count, _ = strconv.Atoi(p[3])
			d.buckets = prometheus.ExponentialBuckets(start, factor, count)
		}
		defs = append(defs, d)
	}
	if len(defs) != 7 {
		t.Fatalf("%d definitions in the golden file, want 7", len(defs))
	}
	return defs
}

func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// seriesOf returns the metric of family mf whose label name is q.
func seriesOf(mf *dto.MetricFamily, q string) *dto.Metric {
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		if labelOf(m, "name") == q {
			return m
		}
	}
	return nil
}

// TestClientGoMetricsMatchClientGo: with Options.ClientGo, the Collector
// exports exactly client-go's seven workqueue series, with client-go's
// names, types, help, single label name and histogram buckets (the golden
// copy of their definitions in testdata cites its source), also with a
// Namespace set; without it, none of them. Catches a renamed series, a
// label still called workqueue, or gowq's own buckets on the histograms.
func TestClientGoMetricsMatchClientGo(t *testing.T) {
	defs := readClientGoDefs(t)
	q := alloc(t, "mt_clientgo_defs", wq.Unbound)
	run(q, 5, func() {})
	q.Flush()
	for _, ns := range []string{"", "myapp"} {
		fams := gather(t, newCollector(t, metrics.Options{Namespace: ns, ClientGo: true, Workqueues: only("mt_clientgo_defs")}))
		for _, d := range defs {
			mf := fams[d.name]
			if mf == nil {
				t.Errorf("namespace %q: %s not exported", ns, d.name)
				continue
			}
			if got := strings.ToLower(mf.GetType().String()); got != d.typ {
				t.Errorf("%s: type %s, want %s", d.name, got, d.typ)
			}
			if mf.GetHelp() != d.help {
				t.Errorf("%s: help %q, want client-go's %q", d.name, mf.GetHelp(), d.help)
			}
			m := seriesOf(mf, "mt_clientgo_defs")
			if m == nil {
				t.Errorf("%s: no series with name=\"mt_clientgo_defs\"", d.name)
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			if !slices.Equal(labels, d.labels) {
				t.Errorf("%s: labels %v, want %v", d.name, labels, d.labels)
			}
			if d.buckets != nil {
				var bounds []float64
				for _, b := range m.GetHistogram().GetBucket() {
					bounds = append(bounds, b.GetUpperBound())
				}
				if !slices.Equal(bounds, d.buckets) {
					t.Errorf("%s: buckets %v, want client-go's %v", d.name, bounds, d.buckets)
				}
				if n := m.GetHistogram().GetSampleCount(); n != 5 {
					t.Errorf("%s: %d observations, want 5", d.name, n)
				}
			}
		}
		if v := seriesOf(fams["workqueue_retries_total"], "mt_clientgo_defs").GetCounter().GetValue(); v != 0 {
			t.Errorf("retries_total = %v, want 0", v)
		}
	}
	fams := gather(t, newCollector(t, metrics.Options{Workqueues: only("mt_clientgo_defs")}))
	for _, d := range defs {
		if fams[d.name] != nil {
			t.Errorf("%s exported without Options.ClientGo", d.name)
		}
	}
}

// TestClientGoDashboardQueries answers a client-go dashboard's two
// queries from scrapes of a gowq program: workqueue_adds_total{name="x"}
// rises by the number of items queued between two scrapes (what
// sum(rate(workqueue_adds_total{name="x"}[1m])) is computed from), and
// workqueue_depth{name="x"} is the number of items waiting. Catches
// series that a dashboard's selector on name does not find, and values
// that do not follow the queue.
func TestClientGoDashboardQueries(t *testing.T) {
	q := alloc(t, "x", wq.Unbound)
	c := newCollector(t, metrics.Options{ClientGo: true, Workqueues: only("x")})
	value := func(metric string) float64 {
		t.Helper()
		m := seriesOf(gather(t, c)[metric], "x")
		if m == nil {
			t.Fatalf("%s{name=\"x\"} not found", metric)
		}
		if m.Counter != nil {
			return m.Counter.GetValue()
		}
		return m.Gauge.GetValue()
	}
	run(q, 3, func() {})
	q.Flush()
	before := value("workqueue_adds_total")
	run(q, 6, func() {})
	q.Flush()
	if d := value("workqueue_adds_total") - before; d != 6 {
		t.Errorf("workqueue_adds_total{name=\"x\"} rose by %v over 6 adds", d)
	}
	if d := value("workqueue_depth"); d != 0 {
		t.Errorf("workqueue_depth{name=\"x\"} = %v on an idle queue", d)
	}
	if err := q.SetMaxActive(1); err != nil {
		t.Fatal(err)
	}
	gate, started := make(chan struct{}), make(chan struct{})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	if err := q.Go(func() { close(started); <-gate }); err != nil {
		t.Fatal(err)
	}
	<-started
	for range 4 {
		if err := q.Go(func() {}); err != nil {
			t.Fatal(err)
		}
	}
	if d := value("workqueue_depth"); d != 4 {
		t.Errorf("workqueue_depth{name=\"x\"} = %v with 4 items waiting behind a running one", d)
	}
	if v := value("workqueue_longest_running_processor_seconds"); v <= 0 {
		t.Errorf("workqueue_longest_running_processor_seconds{name=\"x\"} = %v with an item running", v)
	}
	close(gate)
	q.Flush()
	if d := value("workqueue_depth"); d != 0 {
		t.Errorf("workqueue_depth{name=\"x\"} = %v after Flush", d)
	}
}
