// Package scenario runs the wqlab suite: four scenarios taken from the
// kernel mailing-list threads behind gowq's worker classes (verity,
// erofs, submit, delayed), each measuring every gowq worker class and the
// usual Go executors under the same CPU load and reported as the seeds'
// tables do, and a fifth, throughput, the common case with no
// antagonist. A sixth experiment, blocking (bursts of items that block),
// is not part of the suite and runs alone. Both are driver.Experiments
// (Experiment); the command cmd/wqlab is their user interface, and
// everything it prints and writes for them comes from here.
//
// # Scenarios
//
//   - verity (seed 000): a reader does random 4 KiB reads of a data file
//     (O_DIRECT where the file system allows) and hands each block to the
//     queue to be verified against a SHA-256 Merkle tree (lab/verity),
//     waiting for the result. Reported: fio-style completion latency and
//     bandwidth, plus queue->start latency.
//   - erofs (seeds 003, 001): readers wait for LZ4 clusters of real files
//     (lab/erofs over $GOROOT/src) to be decompressed; each read
//     completes on a timer (the bio completion), which queues the
//     decompression and returns. Includes the per-CPU kthread_worker set
//     of seed 003 (package kthread), plain and SCHED_FIFO-low.
//   - submit (seed 002): a 1 kHz submitter queues a small item and does
//     not wait. Reported: median, min, max, p95, p98, p99.
//   - delayed (seed 004): two hogs pinned to one CPU at nice -20; a thread
//     pinned to that CPU queues a 1 ms delayed item and waits for it.
//     Latency is start - queue - 1 ms. Per-CPU queues run the item on the
//     hogged CPU, and so does the RT unbound row (RT|Unbound is always
//     cpu-scope strict); the other unbound queues may run it elsewhere.
//   - throughput (no seed): with no antagonist, one producer
//     goroutine; idle queue->start with one item every 200 us, then empty
//     items back to back through a ring of 64 work items: items/s, as a
//     multiple of ants/v2's in the same run, allocations per item
//     (runtime.MemStats Mallocs) and CPU seconds per million items
//     (getrusage). Its slices are count-based (200k items and 1000 idle
//     items per row in 8 rounds; --quick 20k and 200 in 4), so
//     Options.Duration does not apply; about 3-8 s on 2 CPUs.
//   - blocking (no seed; not in the suite: `wqlab --scenario blocking`
//     runs it alone, and none of the suite's options apply): bursts of
//     N = 10, 100, 1000 items that each block 1 ms (time.Sleep,
//     nanosleep, a pipe read), on every queue class and a go statement per
//     item; first Queue to Flush, cold (fresh queue) and warm, and the CM
//     monitor thread's CPU per item and while idle.
//
// Scenarios verity, erofs and submit run under 8 CPU burners equivalent
// to fio ioengine=cpuio cpuload=90 numjobs=8 cpumode=qsort (lab/antagonist;
// Options.Antagonist "fio" runs the real fio when installed). The burners
// start once for the three scenarios; the achieved load is measured per
// CPU (antagonist.LoadMeter) and printed with each table.
//
// # Measurement
//
// Latency is always queue->start: stats.Now() (monotonic ns) taken just
// before the queue call, minus stats.Now() taken as the first instruction
// of the work function, for every row alike. Each row has its own
// reusable work items, so nothing allocates on the measured path.
//
// Rows are interleaved: a scenario's measuring time (Options.Duration) is
// cut into rounds, each round gives every row one slice of 50-500 ms,
// and the order rotates by one row per round. A change in the machine's
// load during the run (a burner's phase, a background job) therefore
// falls on every row alike instead of on whichever rows ran at that
// moment. Every row first runs a 30 ms warm-up that is not recorded, so
// that worker threads exist before measuring.
//
// Rows that cannot run here are kept in the table as skipped, with the
// reason: an RT row when wq.Alloc returns wq.ErrPermission (no
// CAP_SYS_NICE, RLIMIT_RTPRIO < 1), a highpri row without the privilege
// for nice -20. Without that privilege seed 004's hogs keep the inherited
// nice. Every row's "ran at" column, the load line and the delayed
// scenario's queueing thread give the class read back from the threads
// (package lab/threadattr), not the one asked for. Run never fails
// half-way.
//
// Each table ends with a verdict line computed from the data: whether the
// best RT row (an RT workqueue or the FIFO-low kthread set) beats every
// Go baseline and every normal-class row on the scenario's metric (verity:
// avg clat; erofs: avg; submit: p98; delayed: p99), or which rows it does
// not beat. The verdict gives its margin (the best opponent's figure over
// the best RT row's) in the whole run and in each interleaving round, RT
// against the same opponent in the same round; it is decided only when
// every round agrees with the whole run, and says "not decided" otherwise
// (see Verdict.Ratio). --quick verdicts say they are indicative.
//
// # Kernel rows
//
// With Options.Kernel (wqlab --kernel) the kernel's own kworkers are
// measured during the same rounds: package lab/ktrace records the
// kernel's workqueue tracepoints through tracefs (a private trace
// instance, removed afterwards; tracefs is mounted for the run when it was
// not) while a helper writes and fsyncs a temporary file every 2 ms, so
// that the block layer and the file system queue their I/O completion
// work. The recording is analysed by package wqtrace/analyze, and the
// busiest workqueues, kblockd first when it has at least 10 items, then
// the others by count, at most three, become rows "kernel kworkers
// (<workqueue>)" of kind and class "kernel" at the end of the table. They
// fill the count and queue->start columns (workqueue_queue_work to
// workqueue_execute_start, 1 us resolution; immediate work, so in the
// delayed scenario they are not start - queue - delay) and print "-" in
// the others (bandwidth, clat, missed, change columns, on hog cpu).
//
// Kernel rows are shown for comparison and take no part in the verdict
// or the change columns: they are not a configuration of the same work
// item, and their load (the fsync helper's I/O) is not the scenario's.
// The helper runs during the rounds of every row alike, so it adds the
// same small I/O load to all of them. Where tracefs cannot be used (not
// root, no tracefs, another recording holding it for more than 5 s) a
// note under the table says why and the run goes on without kernel rows.
//
// # Results document (schema "gowq.wqlab/v1")
//
// Results.WriteJSON writes, and ReadJSON reads, one JSON object. Every
// latency is in microseconds (fields ending in _us), every duration in
// nanoseconds (fields ending in _ns). Fields marked optional are left out
// when empty.
//
//	{
//	  "schema":   "gowq.wqlab/v1",
//	  "started":  RFC 3339 UTC time, "finished": RFC 3339 UTC time,
//	  "machine": {
//	    "cpus": int, "online_cpus": [int], "gomaxprocs": int,
//	    "cpu_model": string (optional), "kernel": "6.18.2", "kernel_version": uname -v,
//	    "arch": "amd64", "go_version": "go1.26.0",
//	    "rt_throttle": "950000/1000000" (optional, sched_rt_runtime_us/period),
//	    "fio_installed": bool,
//	    "privileges": {
//	      "uid": int, "euid": int, "cap_sys_nice": bool,
//	      "sched_fifo": bool, "sched_fifo_reason": string (optional),
//	      "nice_minus_20": bool, "nice_minus_20_reason": string (optional)
//	    }
//	  },
//	  "settings": {
//	    "scenarios": [string], "configs": [string] (optional, as given),
//	    "duration_ns": int (per scenario), "quick": bool, "antagonist": "cpuio"|"fio"|"none",
//	    "verity_size_bytes": int, "erofs_bytes": int, "interleaved": true,
//	    "kernel": bool (optional; kernel rows were recorded)
//	  },
//	  "scenarios": [{
//	    "name": "verity"|"erofs"|"submit"|"delayed"|"throughput", "title": string,
//	    "seeds": ["000"], "description": string,
//	    "skipped": bool (optional), "skip_reason": string (optional),
//	    "default": row id the change columns compare against,
//	    "load": {
//	      "antagonist": string, "antagonist_cpus": float (CPU time / wall),
//	      "per_cpu": [{"cpu": int, "busy_pct": float}], "all_pct": float,
//	      "note": string (optional), "wall_ns": int, "error": string (optional),
//	      "hog_cpu", "hog_nice", "queuer", "delay_ns" (delayed only),
//	      "readers", "direct_io", "data_bytes", "data_source" (verity, erofs),
//	      "period_ns" (submit)
//	    },
//	    "duration_ns": int, "slice_ns": int, "rounds": int,
//	    "rows": [{
//	      "id": "rt-percpu" ("kernel:kblockd" for kernel rows), "label": "RT per-CPU",
//	      "note": string (optional; the workqueue for kernel rows),
//	      "kind": "gowq"|"kthread"|"baseline"|"kernel", "class": "normal"|"highpri"|"rt"|"go"|"kernel",
//	      "flags": "PERCPU|RT" (gowq rows),
//	      "skipped": bool (optional), "skip_reason": string (optional),
//	      "ran_at": "nice 19"|"nice -20"|"FIFO 1"|... (optional; read back from the threads that ran probe items),
//	      "items": int,
//	      "queue_to_start": Latency,
//	      "clat": Latency (verity), "clat_cdf": [{"us", "frac"}] (verity), "bandwidth_mib_s": float (verity),
//	      "missed": int (optional), "on_queue_cpu_pct": float (delayed),
//	      "change_pct": {"avg": float, "p99": float, ...} (optional; against "default"),
//	      "cdf": [{"us": float, "frac": float}] (queue_to_start at fixed fractions 0..1),
//	      "errors": int (optional), "error": string (optional),
//	      "measured_ns": int
//	    }],
//	    "verdict": {
//	      "metric": string, "decided": bool, "rt_wins": bool,
//	      "best_rt": row id, "loser": row id (optional), "text": string,
//	      "ratio": float (best opponent over best RT, > 1: RT better), "round_ratios": [float],
//	      "ratio_min": float, "ratio_max": float (the spread; decided only when all rounds agree),
//	      "indicative": bool (optional; --quick)
//	    },
//	    "notes": [string] (optional), "plot": file name (optional)
//	  }]
//	}
//
// Latency is {"count", "min_us", "median_us", "avg_us", "max_us",
// "stdev_us", "p90_us", "p95_us", "p98_us", "p99_us", "p99_9_us",
// "exact"}; percentiles interpolate between closest ranks (lab/stats),
// and "exact" is false when they came from the HdrHistogram (more than
// 1Mi samples; within 0.1%).
//
// A new field may be added without changing the schema name; removing or
// changing the meaning of one changes it.
//
// # The other experiments' documents
//
// Every experiment writes one JSON document of the same form (its
// Result.WriteJSON, driver.WriteJSON): an object whose "schema" is
// "gowq.wqlab.<name>/v1" (driver.Schema), latencies in microseconds
// (_us), durations in nanoseconds (_ns), the same rule for new fields.
// `wqlab wake --json`, `wqlab adaptive --json`, `wqlab roundtrip --json`
// and `wqlab twq --json` write theirs (schemas "gowq.wqlab.wake/v1",
// "gowq.wqlab.adaptive/v1", "gowq.wqlab.roundtrip/v1" and
// "gowq.wqlab.twq/v1"; the fields are the JSON tags of wake.Result,
// adaptive.Result, twq.RoundTripResult and twq.TWQResult). The blocking
// experiment's (`wqlab --scenario blocking`, which also writes
// blocking.json and blocking.txt into --out) is:
//
//	{
//	  "schema": "gowq.wqlab.blocking/v1",
//	  "bursts": [{
//	    "config": "per-CPU normal"|"per-CPU RT"|"unbound normal"|"unbound RT"|"go statement",
//	    "kind": "time.Sleep"|"nanosleep"|"pipe read", "n": int,
//	    "cold_ns": int, "warm_ns": int (first Queue to Flush returning),
//	    "skipped": string (optional; why), "monitor_cpu_ns": int (per-CPU rows)
//	  }],
//	  "cm_idle_light_us_per_s": float, "cm_idle_deep_us_per_s": float
//	}
package scenario
