package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gowq/wq"
)

// client-go's workqueue metrics (k8s.io/client-go/util/workqueue), with
// their names under the Collector's namespace and their meaning mapped
// onto a gowq queue:
//
//	depth                             items waiting: queued and not started (wq.QueueStats.Pending)
//	adds_total                        items queued (wq.QueueStats.Adds)
//	unfinished_work_seconds           the sum of how long each running item has run (wq.RunningStats.Unfinished)
//	longest_running_processor_seconds how long the oldest running item has run (wq.RunningStats.Longest)
//
// client-go's queue_duration_seconds and work_duration_seconds are the
// Collector's histograms of the same names.

func (c *Collector) backlogDescs(q func(name, help string, labels ...string) *prometheus.Desc) {
	c.depth = q("depth", "Work items waiting on the workqueue: queued and not started, including the inactive ones over max_active and keyed items waiting in their key's chain (client-go's workqueue_depth).")
	c.adds = q("adds_total", "Work items queued on the workqueue; a queue call for an item already pending is not an add (client-go's workqueue_adds_total).")
	c.unfinished = q("unfinished_work_seconds", "Sum of the time the workqueue's running items have been running; a large value with few items means stuck items (client-go's workqueue_unfinished_work_seconds).")
	c.longest = q("longest_running_processor_seconds", "How long the workqueue's longest-running item has been running; 0 when none runs (client-go's workqueue_longest_running_processor_seconds).")
}

func (c *Collector) collectBacklog(gauge, counter func(d *prometheus.Desc, v float64, lv ...string), s *queueSample) {
	gauge(c.depth, float64(max(s.st.Pending, 0)), s.name)
	counter(c.adds, float64(s.st.Adds), s.name)
	gauge(c.unfinished, s.run.Unfinished.Seconds(), s.name)
	gauge(c.longest, s.run.Longest.Seconds(), s.name)
}

// mergeRunning merges the running items of two queues that share a name.
func mergeRunning(a, b wq.RunningStats) wq.RunningStats {
	a.Items += b.Items
	a.Unfinished += b.Unfinished
	a.Longest = max(a.Longest, b.Longest)
	return a
}
