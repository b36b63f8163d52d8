// Package wqhttp serves gowq's workqueue state over HTTP, the way
// net/http/pprof serves profiles: Handler returns an http.Handler that the
// program mounts on a mux of its choosing. Nothing is registered on
// http.DefaultServeMux.
//
//	mux := http.NewServeMux()
//	mux.Handle("/debug/wq/", wqhttp.Handler(wqhttp.Options{Prefix: "/debug/wq"}))
//
// Endpoints (relative to the mount point; text by default, JSON with
// ?format=json):
//
//	/          an index of the endpoints
//	/ui        a live HTML page, compiled into the binary and self-contained
//	           (inline CSS and script, no external asset): the monitor
//	           table with items/s, each queue's queue-to-start histogram
//	           (log2 us buckets) and the pools with their workers; it
//	           polls /monitor, /hist and /dump (JSON) once a second. Every
//	           column header has a tooltip, and a legend below the tables
//	           says what each column means (MonitorColumns, UIColumns,
//	           PoolColumns; wqmon prints the same text)
//	/monitor   the table of the kernel's tools/workqueue/wq_monitor.py:
//	           total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC per
//	           workqueue; ?filter=REGEX keeps the queues whose name matches
//	/dump      the view of the kernel's tools/workqueue/wq_dump.py: affinity
//	           pods per scope, worker pools (class, nice, policy, cpus,
//	           strict, idle/workers) with their workers (tid, CPU, current
//	           function, how long it has run; a goroutine-backed pool's
//	           workers show tid=goroutine, "goroutines": true in JSON), and
//	           which pool serves each workqueue on each CPU
//	/hist      queue-to-start latency and execution time histograms per
//	           workqueue, printed like bcc's log2 histograms; ?wq=NAME or
//	           ?filter=REGEX select queues
//	/attrs     GET: the attributes of every Sysfs workqueue and the
//	           process-wide ones; /attrs/<queue>, /attrs/<queue>/<attr>,
//	           /attrs/global and /attrs/global/<attr> read one part.
//	           POST or PUT /attrs/<queue>/<attr> or /attrs/global/<attr>
//	           with the new value as the body writes it, only with
//	           Options.AllowWrites
//
// Which queues are shown: /monitor, /dump and /hist show every live
// workqueue (wq.Queues(false)), as the kernel's wq_monitor.py and
// wq_dump.py walk the list of all workqueues. /attrs shows only the queues
// created with wq.Sysfs (wq.Queues(true)), as the kernel exposes only
// WQ_SYSFS queues under /sys/devices/virtual/workqueue. A Sysfs queue named
// "global" is shadowed by the process-wide attributes under /attrs.
//
// Attribute writes answer 200 with the new value; 403 when writes are
// disabled, when the request comes from another origin (a browser's
// cross-site POST, see http.CrossOriginProtection) or when the process
// lacks the privilege (wq.ErrPermission); 404 for an unknown queue or
// attribute; 400 with the error text for an invalid value
// (wq.ErrInvalidArgument); 409 for a read-only attribute (wq.ErrReadOnly);
// 410 for a queue destroyed meanwhile; 413 for a body over 4 KiB; 503
// when the value could not be tried because the process is at a thread
// limit (wq.ErrThreadLimit). Writes are validated by wq against what the
// process can do (a nice, class or CPU list no worker could get is
// refused with 403 or 400) and a refused write changes nothing: numbers
// are range-checked (an overflowing one answers 400), and a write to
// several Sysfs queues of one name that one of them refuses gives the
// others back exactly the state they had, every attribute and the worker
// class in force (wq.SetAttrQueues, which holds off other attribute
// writers meanwhile), not only the one written.
//
// Every endpoint only reads snapshots (wq.Queues, Workqueue.Stats,
// wq.Pools, wq.AffinityPods): a request never waits for a work item.
package wqhttp
