package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gowq/wq"
)

// client-go compatibility (Options.ClientGo): the seven series that
// client-go's workqueue exports through k8s.io/component-base's Prometheus
// provider, under their names (no namespace), with their one label name,
// their help text as a client-go program exposes it (component-base
// prefixes the stability level) and their buckets, so that dashboards and
// alerts written for client-go controllers read gowq queues unchanged.
// testdata/client-go-workqueue-metrics.txt records the definitions and
// their source; TestClientGoMetricsMatchClientGo checks against it.

// clientGoBuckets are client-go's histogram bounds in seconds: 10 ns to
// 10 s, one per decade (ExponentialBuckets(10e-9, 10, 10)).
func clientGoBuckets() []float64 { return prometheus.ExponentialBuckets(10e-9, 10, 10) }

// clientGoHelp is the help of each series as a client-go program scrapes
// it (component-base's metrics/prometheus/workqueue, stability BETA).
var clientGoHelp = map[string]string{
	"depth":                             "[BETA] Current depth of workqueue",
	"adds_total":                        "[BETA] Total number of adds handled by workqueue",
	"queue_duration_seconds":            "[BETA] How long in seconds an item stays in workqueue before being requested.",
	"work_duration_seconds":             "[BETA] How long in seconds processing an item from workqueue takes.",
	"unfinished_work_seconds":           "[BETA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	"longest_running_processor_seconds": "[BETA] How many seconds has the longest running processor for workqueue been running.",
	"retries_total":                     "[BETA] Total number of retries handled by workqueue",
}

// clientGo holds the descriptors of the client-go series, and the
// histogram bounds they use.
type clientGo struct {
	depth, adds, queueDuration, workDuration, unfinished, longest, retries *prometheus.Desc

	boundsNs []int64
	boundsS  []float64
}

func newClientGo(cl prometheus.Labels) *clientGo {
	d := func(name string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("", "workqueue", name), clientGoHelp[name], []string{"name"}, cl)
	}
	g := &clientGo{
		depth:         d("depth"),
		adds:          d("adds_total"),
		queueDuration: d("queue_duration_seconds"),
		workDuration:  d("work_duration_seconds"),
		unfinished:    d("unfinished_work_seconds"),
		longest:       d("longest_running_processor_seconds"),
		retries:       d("retries_total"),
		boundsS:       clientGoBuckets(),
	}
	for _, b := range g.boundsS {
		g.boundsNs = append(g.boundsNs, int64(b*1e9+0.5))
	}
	return g
}

func (g *clientGo) descs() []*prometheus.Desc {
	return []*prometheus.Desc{g.depth, g.adds, g.queueDuration, g.workDuration, g.unfinished, g.longest, g.retries}
}

// collect sends the client-go series of one queue. retries_total is
// always 0: client-go counts AddRateLimited calls, and gowq has no
// rate-limited requeue (a periodic QueueDelayed is not a retry, and
// counting it would fire retry alerts on every timer).
func (g *clientGo) collect(gauge, counter func(d *prometheus.Desc, v float64, lv ...string), hist func(d *prometheus.Desc, h wq.HistSnapshot, boundsNs []int64, boundsS []float64, lv ...string) prometheus.Metric, ch chan<- prometheus.Metric, s *queueSample) {
	gauge(g.depth, float64(max(s.st.Pending, 0)), s.name)
	counter(g.adds, float64(s.st.Adds), s.name)
	ch <- hist(g.queueDuration, s.st.Latency, g.boundsNs, g.boundsS, s.name)
	ch <- hist(g.workDuration, s.st.Exec, g.boundsNs, g.boundsS, s.name)
	gauge(g.unfinished, s.run.Unfinished.Seconds(), s.name)
	gauge(g.longest, s.run.Longest.Seconds(), s.name)
	counter(g.retries, 0, s.name)
}
