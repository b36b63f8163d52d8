package scenario

import (
	"fmt"

	"github.com/gowq/wq/lab/driver"
)

// metric is a number of a row that tables compare.
type metric struct {
	key          string // key in Row.Change, e.g. "avg"
	name         string // e.g. "avg queue->start"
	get          func(r *Row) float64
	higherBetter bool // bandwidth
}

var (
	mAvg    = metric{key: "avg", name: "avg queue->start", get: func(r *Row) float64 { return r.QueueToStart.AvgUs }}
	mMedian = metric{key: "median", name: "median queue->start", get: func(r *Row) float64 { return r.QueueToStart.MedianUs }}
	mMax    = metric{key: "max", name: "max queue->start", get: func(r *Row) float64 { return r.QueueToStart.MaxUs }}
	mP98    = metric{key: "p98", name: "p98 queue->start", get: func(r *Row) float64 { return r.QueueToStart.P98Us }}
	mP99    = metric{key: "p99", name: "p99 queue->start", get: func(r *Row) float64 { return r.QueueToStart.P99Us }}
	mClat   = metric{key: "clat_avg", name: "avg clat", get: func(r *Row) float64 {
		if r.Clat == nil {
			return 0
		}
		return r.Clat.AvgUs
	}}
	mBW = metric{key: "bw", name: "bandwidth", get: func(r *Row) float64 { return r.BandwidthMiBs }, higherBetter: true}
)

// column is one column of a scenario's table.
type column struct {
	head string
	cell func(r *Row) string
	// kernel is true for the columns that apply to kernel rows (count and
	// queue->start figures); the others print "-" for them.
	kernel bool
}

func latCol(head string, f func(l Latency) float64) column {
	return column{head, func(r *Row) string { return fmtUs(f(r.QueueToStart)) }, true}
}

func chgCol(m metric) column {
	return column{m.key + " chg", func(r *Row) string { return fmtChange(r, m) }, false}
}

var (
	colN      = column{"n", func(r *Row) string { return fmt.Sprint(r.Items) }, true}
	colAvg    = latCol("avg", func(l Latency) float64 { return l.AvgUs })
	colMedian = latCol("median", func(l Latency) float64 { return l.MedianUs })
	colMin    = latCol("min", func(l Latency) float64 { return l.MinUs })
	colMax    = latCol("max", func(l Latency) float64 { return l.MaxUs })
	colStdev  = latCol("stdev", func(l Latency) float64 { return l.StdevUs })
	colP95    = latCol("p95", func(l Latency) float64 { return l.P95Us })
	colP98    = latCol("p98", func(l Latency) float64 { return l.P98Us })
	colP99    = latCol("p99", func(l Latency) float64 { return l.P99Us })
	colMissed = column{"missed", func(r *Row) string { return fmt.Sprint(r.Missed) }, false}
)

func clatCol(head string, f func(l Latency) float64) column {
	return column{head, func(r *Row) string {
		if r.Clat == nil {
			return "-"
		}
		return fmtUs(f(*r.Clat))
	}, false}
}

// scenarioDef is the static description of a scenario.
type scenarioDef struct {
	name, title, desc string
	seeds             []string
	rows              []rowDef
	dflt              string   // ID of the reference row
	dfltWhy           string   // why that row is the reference, for the table's reference line
	verdict           metric   // what the verdict compares
	changes           []metric // stored in Row.Change
	columns           []column
	notes             []string
	load              driver.LoadKind
	// rounds, when set, makes the slices count-based: this many rounds,
	// each slice the workload's share of its items (slice length 0).
	rounds func(p *plan) int
	// finish, when set, completes the rows after changes are computed.
	finish func(s *ScenarioResult)
	// verdictFn, when set, replaces computeVerdict(verdict).
	verdictFn func(s *ScenarioResult) Verdict
}

func defOf(name string) *scenarioDef {
	for _, d := range scenarioDefs {
		if d.name == name {
			return d
		}
	}
	return nil
}

func rowsOf(name string) []rowDef {
	if d := defOf(name); d != nil {
		return d.rows
	}
	return nil
}

var scenarioDefs = []*scenarioDef{
	{
		name:  Verity,
		title: "dm-verity: random 4 KiB reads, each block verified on the queue",
		desc: "A reader does random 4 KiB reads of a data file (O_DIRECT where allowed) and hands each block to " +
			"the queue to be checked against a SHA-256 Merkle tree, waiting for the result (fio randread + dm-verity).",
		seeds: []string{"000"},
		rows: append([]rowDef{
			row("highpri-unbound", "dm-verity before"),
			row("highpri-percpu", ""),
			row("normal-unbound", ""),
			row("normal-percpu", ""),
			row("rt-percpu", "WQ_SCHED_FIFO"),
			row("rt-unbound", ""),
		}, baselineRows()...),
		dflt:    "highpri-unbound",
		dfltWhy: "seed 000's \"before\": dm-verity's queue before it became WQ_SCHED_FIFO",
		verdict: mClat,
		changes: []metric{mClat, mBW, mP99},
		columns: []column{
			colN,
			{"bw MiB/s", func(r *Row) string { return fmt.Sprintf("%.1f", r.BandwidthMiBs) }, false},
			chgCol(mBW),
			clatCol("clat avg", func(l Latency) float64 { return l.AvgUs }),
			clatCol("clat stdev", func(l Latency) float64 { return l.StdevUs }),
			clatCol("clat max", func(l Latency) float64 { return l.MaxUs }),
			chgCol(mClat),
			latCol("q->s med", func(l Latency) float64 { return l.MedianUs }),
			latCol("q->s p99", func(l Latency) float64 { return l.P99Us }),
			latCol("q->s max", func(l Latency) float64 { return l.MaxUs }),
		},
		notes: []string{
			"clat: fio's completion latency of one read: pread + queue + verify + wake-up of the reader.",
			"q->s: queue->start, from just before the queue call to the work function's first instruction.",
		},
		load: loadBurners,
	},
	{
		name:  Erofs,
		title: "EROFS: LZ4 cluster decompression queued after each read",
		desc: "Readers each read a random LZ4 cluster of real files (GOROOT/src) and sleep until it is decompressed; " +
			"the read completes after 200 us on a timer, which queues the decompression as EROFS's bio completion " +
			"queues z_erofs_decompressqueue_work.",
		seeds: []string{"003", "001"},
		rows: append([]rowDef{
			row("highpri-unbound", "default erofs"),
			row("highpri-percpu", "!WQ_UNBOUND"),
			row("normal-unbound", ""),
			row("normal-percpu", ""),
			row("kthread", ""),
			row("kthread-fifo", "hipri pcpu kthreads"),
			row("rt-percpu", "SCHED_FIFO only"),
			row("rt-unbound", ""),
		}, baselineRows()...),
		dflt:    "highpri-unbound",
		dfltWhy: "what EROFS queues its decompression on today (an unbound WQ_HIGHPRI queue), which seeds 003 and 001 set out to beat",
		verdict: mAvg,
		changes: []metric{mAvg, mMedian, mMax},
		columns: []column{colN, colAvg, colMedian, colMin, colMax, colStdev, colP99, chgCol(mAvg), chgCol(mMax)},
		notes: []string{
			"Each read completes on a Go timer (the bio completion), which queues the decompression and returns.",
		},
		load: loadBurners,
	},
	{
		name:  Submit,
		title: "GPU-style submit: a 1 kHz submitter queues small work items",
		desc: "A submitter queues a small \"submit\" work item (SHA-256 of 512 bytes) every 1 ms without waiting " +
			"for it; a tick is missed when its 16 slots are all still busy or the submitter woke a period late.",
		seeds: []string{"002"},
		rows: append([]rowDef{
			row("normal-unbound", "default"),
			row("normal-percpu", ""),
			row("highpri-unbound", ""),
			row("highpri-percpu", ""),
			row("rt-percpu", "WQ_RT*"),
			row("rt-unbound", "WQ_RT +strict"),
		}, baselineRows()...),
		dflt:    "normal-unbound",
		dfltWhy: "the default queue (no class flag), seed 002's \"before\" and what a Go program gets from wq.Alloc with no flags",
		verdict: mP98,
		changes: []metric{mMedian, mMax, mP98},
		columns: []column{colN, colMedian, colMin, colMax, colP95, colP98, colP99, colMissed, chgCol(mP98), chgCol(mMax)},
		notes: []string{
			"missed: 1 ms ticks not submitted (all 16 slots busy, or the submitter itself woke more than 1 ms late).",
			"* gowq has no attribute API to turn affinity_strict off on an RT unbound queue (RT|Unbound is always " +
				"cpu-scope strict), so the non-strict \"WQ_RT\" row of seed 002 is measured as RT|PerCPU.",
		},
		load: loadBurners,
	},
	{
		name:  Delayed,
		title: "delayed work queued from a hogged CPU (hogs at nice -20 where permitted; the load line gives the nice read back)",
		desc: "A thread pinned to the hogged CPU queues a delayed work item (1 ms) and waits for it; latency is " +
			"start - queue - 1 ms. Per-CPU queues run the item on the hogged CPU, and so does the RT unbound strict row: " +
			"RT|Unbound is always cpu-scope strict, so its pod is the queueing CPU alone. The other unbound queues may run it on another CPU.",
		seeds: []string{"004"},
		rows: append([]rowDef{
			row("normal-percpu", "before seed 004"),
			row("normal-unbound", "seed 004"),
			row("highpri-percpu", ""),
			row("highpri-unbound", ""),
			row("rt-percpu", ""),
			row("rt-unbound", ""),
		}, baselineRows()...),
		dflt:    "normal-percpu",
		dfltWhy: "seed 004's \"before\": delayed work on a per-CPU queue, which runs on the hogged CPU",
		verdict: mP99,
		changes: []metric{mP99, mMax},
		columns: []column{colN, colMedian, colP99, colMax, colAvg,
			{"on hog cpu", func(r *Row) string {
				if r.OnQueueCPUPct == nil {
					return "-"
				}
				return fmt.Sprintf("%.0f%%", *r.OnQueueCPUPct)
			}, false},
			chgCol(mP99), chgCol(mMax)},
		notes: []string{
			"Latency counts from the end of the 1 ms delay, so it includes the timer's own lateness: gowq's RT rows are timed by " +
				"the SCHED_FIFO timer thread, its normal and highpri rows by Go timers; baselines use time.AfterFunc(1ms) and then submit, as Go code does.",
			"on hog cpu: share of items that started on the hogged CPU they were queued from.",
		},
		load: loadHog,
	},
	{
		name:  Throughput,
		title: "common case: idle wake-up and back-to-back throughput of empty items",
		desc: "One producer goroutine, no antagonist unless --throughput-load (the load line says which, and how busy the machine was). Idle: one item every 200 us, " +
			"so that the worker is idle when it is queued, queue->start. Throughput: empty items " +
			"queued back to back through a ring of 64 work items, items/s from the first queue to the last item's run, " +
			"with allocations and process CPU time per item.",
		seeds: nil,
		rows: append([]rowDef{
			row("normal-percpu", ""),
			row("normal-unbound", ""),
			row("highpri-percpu", ""),
			row("rt-percpu", ""),
			row("rt-unbound", ""),
			row("rt-percpu-batch", ""),
			row("rt-unbound-batch", ""),
		}, baselineRows()...),
		dflt:    "ants",
		dfltWhy: "the most used Go pool; the throughput goals are multiples of its items/s in the same run",
		verdict: mMedian,
		changes: []metric{mMedian, mP99},
		columns: []column{colN,
			latCol("idle p50", func(l Latency) float64 { return l.MedianUs }),
			latCol("idle p99", func(l Latency) float64 { return l.P99Us }),
			latCol("idle max", func(l Latency) float64 { return l.MaxUs }),
			tputCol("items/s", func(t *BackToBack) string { return fmtRate(t.ItemsPerSec) }),
			tputCol("x ants", func(t *BackToBack) string {
				if t.VsAnts == 0 {
					return "-"
				}
				return fmt.Sprintf("%.2fx", t.VsAnts)
			}),
			tputCol("allocs/item", func(t *BackToBack) string { return fmt.Sprintf("%.3f", t.AllocsPerItem) }),
			tputCol("CPU s/M items", func(t *BackToBack) string { return fmt.Sprintf("%.2f", t.CPUSecPerMItems) }),
		},
		notes: []string{
			"n, idle: sparse items, one every 200 us (plus the sleep's own lateness), each queued to an idle worker; queue->start latency.",
			"items/s: empty items from one producer, back to back through a ring of 64 work items; x ants: over ants/v2 in this run.",
			"batches of 64: the ring's idle items queued with one QueueBatch call (each pool woken once per call); idle: one item per call.",
			"allocs/item: runtime.MemStats Mallocs over the phase / items; CPU s/M items: getrusage(RUSAGE_SELF) user+system " +
				"over the phase, per million items (the whole process: spinning workers count).",
		},
		load:      loadNone,
		rounds:    func(p *plan) int { return newThroughput(p).rounds },
		finish:    finishThroughput,
		verdictFn: throughputVerdict,
	},
}

// Info describes a scenario for listings.
type Info struct {
	Name    string
	Title   string
	Seeds   []string
	Default string   // ID of the reference row
	Configs []string // IDs of its rows, in table order
}

// Catalog returns every scenario with its configurations, in run order.
func Catalog() []Info {
	var out []Info
	for _, d := range scenarioDefs {
		in := Info{Name: d.name, Title: d.title, Seeds: d.seeds, Default: d.dflt}
		for _, r := range d.rows {
			in.Configs = append(in.Configs, r.ID)
		}
		out = append(out, in)
	}
	return out
}
