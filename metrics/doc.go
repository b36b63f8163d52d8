// Package metrics exports gowq's workqueue and worker-pool statistics to
// Prometheus. It is a separate package so that the core package wq does not
// depend on client_golang: import it only where a Prometheus registry is
// used.
//
//	c, err := metrics.NewCollector(metrics.Options{})
//	if err != nil { ... }
//	prometheus.MustRegister(c)
//
// The Collector reads wq.Queues(false) (every live workqueue, like the
// kernel's tools/workqueue/wq_monitor.py, not only the Sysfs ones) and
// wq.Pools() at each scrape; it keeps no state of its own between scrapes
// and adds nothing to the work item hot path.
//
// # Metrics
//
// Per workqueue, with the label workqueue (the columns of wq_monitor.py):
//
//	gowq_workqueue_info{type,policy,flags}        1; type is percpu, unbound or ordered
//	gowq_workqueue_max_active                     gauge
//	gowq_workqueue_items_started_total            counter (total)
//	gowq_workqueue_items_completed_total          counter
//	gowq_workqueue_items_in_flight                gauge (infl)
//	gowq_workqueue_cpu_seconds_total              counter (CPUtime)
//	gowq_workqueue_cpu_intensive_violations_total counter (CPUitsv), per-CPU queues only
//	gowq_workqueue_cm_wakeups_total               counter (CMW), per-CPU queues only
//	gowq_workqueue_repatriations_total            counter (RPR), unbound queues only
//	gowq_workqueue_mayday_total                   counter, MemReclaim queues only
//	gowq_workqueue_rescued_total                  counter, MemReclaim queues only
//	gowq_workqueue_panics_total                   counter
//	gowq_workqueue_escapes_total                  counter (ESC), per-CPU queues with escape_after only
//	gowq_workqueue_queue_duration_seconds         histogram: queue_work to execute_start
//	gowq_workqueue_work_duration_seconds          histogram: execute_start to execute_end
//	gowq_workqueue_p_wait_seconds                 histogram: a woken worker thread's wait for a Go P (QueueStats.PWait)
//	gowq_workqueue_depth                          gauge: items waiting, not started (wq.QueueStats.Pending)
//	gowq_workqueue_adds_total                     counter: items queued (wq.QueueStats.Adds)
//	gowq_workqueue_unfinished_work_seconds        gauge: sum of the running items' time so far
//	gowq_workqueue_longest_running_processor_seconds gauge: the oldest running item's time so far
//
// cpu_seconds_total stays 0 for a goroutine-backed queue (wq.Workqueue.
// GoroutineBacked: no per-goroutine CPU clock), and p_wait_seconds stays
// empty for it (a goroutine that runs holds a P).
//
// A counter that wq_monitor.py prints as "-" for a queue (CPUitsv and CMW
// for unbound queues, RPR for per-CPU ones, mayday and rescued without
// MemReclaim) is not exported for that queue, rather than exported as a
// misleading 0. The two histogram names, depth, adds_total,
// unfinished_work_seconds and longest_running_processor_seconds follow
// client-go's workqueue metrics, with their meaning: depth counts the
// items queued and not started (keyed items waiting in their key's chain
// included, armed delayed items not), an add is an item queued (a queue
// call for an item already pending is not one), unfinished work is the
// sum of how long each running item has run, and the longest running
// processor is the oldest running item (items run by a rescuer or an
// escaper are not in these two). The two running-time gauges take each of
// the queue's pool locks briefly (wq.Workqueue.Running). Queues that share a name are merged into one series (their
// counters summed, their histograms merged), since Prometheus cannot hold
// two series with equal labels; the info series' type, policy and flags,
// and which per-type counters are exported, are those of the first of
// them in the order of type, then policy, then flags, the same at every
// scrape.
//
// # client-go's series
//
// With Options.ClientGo, the Collector also exports, per workqueue, the
// series that a client-go controller exports (k8s.io/client-go's
// workqueue metrics through k8s.io/component-base's Prometheus provider),
// with client-go's names (no namespace), its single label name (the
// queue's name), its help text and its buckets (ExponentialBuckets(10e-9,
// 10, 10): 10 ns to 10 s), so that a dashboard or alert written for
// client-go reads a gowq program unchanged:
//
//	workqueue_depth{name}                             gauge: as gowq_workqueue_depth
//	workqueue_adds_total{name}                        counter: as gowq_workqueue_adds_total
//	workqueue_queue_duration_seconds{name}            histogram: queue_work to execute_start
//	workqueue_work_duration_seconds{name}             histogram: execute_start to execute_end
//	workqueue_unfinished_work_seconds{name}           gauge: as gowq_workqueue_unfinished_work_seconds
//	workqueue_longest_running_processor_seconds{name} gauge: as gowq_workqueue_longest_running_processor_seconds
//	workqueue_retries_total{name}                     counter: always 0
//
// retries_total counts client-go's AddRateLimited calls; gowq has no
// rate-limited requeue, and counting QueueDelayed instead would fire
// retry alerts on every periodic timer, so it stays 0. client-go's bucket
// bounds are not bucket boundaries of wq's histograms: each cumulative
// count is rounded as described under Histograms. The series come in
// addition to the gowq_ ones, and the two gauges of running time are
// computed at the scrape (client-go recomputes them every 500 ms).
//
// Per worker pool, with the labels pool (id), cpu (the CPU of a per-CPU
// pool, "" for unbound pools), cpus (the CPUs its workers may use, list
// format), policy (SCHED_OTHER or SCHED_FIFO) and nice:
//
//	gowq_pool_workers                 gauge
//	gowq_pool_idle_workers            gauge
//	gowq_pool_pending_items           gauge: items on the pool's worklist
//	gowq_pool_max_running_seconds     gauge: longest time a current item has run
//
// # Histograms
//
// wq keeps log-linear histograms in ns (each power of two split in 8
// buckets, see wq.HistSnapshot). The Collector turns them into classic
// Prometheus buckets with fixed bounds, so that series stay stable between
// scrapes: by default the powers of two from 2^10 ns (1.024 us) to 2^36 ns
// (about 68.7 s), which are bucket boundaries of wq's histograms, so the
// cumulative counts are exact (up to one ns: a bucket le=b counts the
// observations below b ns, Prometheus's "<=" differs only for an
// observation of exactly b ns). Other bounds (Options.Buckets) are rounded
// to the snapshot's buckets: a snapshot bucket counts towards every bound
// above its lower bound.
package metrics
