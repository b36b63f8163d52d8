package wake

// Rendering of explain mode's attribution (Explain) in the wake table.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gowq/wq/lab/driver"
)

// write prints the attribution: the threshold, the runtime's own
// figures, up to ExplainLinesPerRow lines per row, and the count per
// cause per row.
func (ex *Explain) write(b *strings.Builder) {
	fmt.Fprintf(b, "\nexplain: outliers above %.1f us (%s)\n", ex.ThresholdUs, ex.ThresholdBy)
	fmt.Fprintf(b, "runtime: %d GC cycles during the run, %d STW pauses (max %.1f us) in the MemStats ring", ex.GCCycles, ex.GCPauses, ex.GCPauseMax)
	if ex.GCPausesLost > 0 {
		fmt.Fprintf(b, ", %d cycles lost from the ring", ex.GCPausesLost)
	}
	fmt.Fprintf(b, "; /sched/pauses/total/gc:seconds %d pauses, p99 <= %.1f us, max <= %.1f us; /sched/latencies:seconds p99 <= %.1f us, max <= %.1f us\n",
		ex.STWPauses, ex.STWPauseP99, ex.STWPauseMax, ex.SchedLatP99, ex.SchedLatMax)
	fmt.Fprintf(b, "GC overlap from: %s", ex.STWSource)
	if ex.TraceSTW > 0 {
		fmt.Fprintf(b, ", %d stop-the-world ranges, longest %.1f us", ex.TraceSTW, ex.TraceSTWMax)
	}
	b.WriteByte('\n')
	var lines []driver.Line
	for _, re := range ex.Rows {
		for _, o := range re.Lines {
			lw := optN(o.LockWaits)
			if o.LockSpan > 1 {
				lw += fmt.Sprintf(" /%d", o.LockSpan)
			}
			lines = append(lines, driver.Line{Cells: []string{re.Config, us(o.LatencyNs), queueCell(o.Evidence),
				optUs(o.QueuerDelay), optUs(o.WorkerDelay), optN(o.ExtraSleeps), lw, us(o.GCOverlapNs), stageCell(o.Evidence), string(o.Cause)}})
		}
		if more := re.Outliers - len(re.Lines); more > 0 {
			lines = append(lines, driver.Line{Cells: []string{re.Config, fmt.Sprintf("+%d more", more)}})
		}
	}
	if len(lines) > 0 {
		driver.WriteBox(b, []string{"row", "latency", "queue call", "queuer run_delay", "worker run_delay", "extra sleeps", "lock waits", "GC overlap", "stage", "cause"}, lines)
		b.WriteString("us; queue call: t1-t0 of Queue/Submit (* the item started inside the call); run_delay: time waited runnable for a CPU (schedstat); extra sleeps: worker's voluntary switches beyond its park; lock waits /n: over the last n samples; stage: the largest gap between the library's stage stamps (call: t0, queue: queue entry, locked: pool lock, wake: futex_wake, woken: back from futex_wait, haveP: holding a P, start: item start, fn: the function's stamp); - unknown\n")
	}
	causes := Causes()
	heads := []string{"row", "outliers"}
	for _, c := range causes {
		heads = append(heads, string(c))
	}
	heads = append(heads, "queue call p50/p99")
	var sum []driver.Line
	for _, re := range ex.Rows {
		cells := []string{re.Config, fmt.Sprint(re.Outliers)}
		for _, c := range causes {
			cells = append(cells, fmt.Sprint(re.Causes[c]))
		}
		qc := "-"
		if re.QueueUs != nil {
			qc = fmt.Sprintf("%.1f/%.1f", re.QueueUs.Median, re.QueueUs.P99)
		}
		sum = append(sum, driver.Line{Cells: append(cells, qc)})
	}
	b.WriteString("outlier causes per row:\n")
	driver.WriteBox(b, heads, sum)
	tot := map[Cause]int{}
	all := 0
	for _, re := range ex.Rows {
		for c, n := range re.Causes {
			tot[c] += n
		}
		all += re.Outliers
	}
	parts := []string{}
	for _, c := range causes {
		if tot[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", c, tot[c]))
		}
	}
	fmt.Fprintf(b, "causes, all rows: %d outliers", all)
	if len(parts) > 0 {
		fmt.Fprintf(b, ": %s", strings.Join(parts, ", "))
	}
	b.WriteByte('\n')
	if st := ex.stageCounts(); len(st) > 0 {
		fmt.Fprintf(b, "stage where the time went, all rows (outliers with the library's stages): %s\n", strings.Join(st, ", "))
	}
}

// stageCounts returns "stage n" for every largest-gap stage of the
// outliers, most frequent first (ties by name).
func (ex *Explain) stageCounts() []string {
	n := map[string]int{}
	for _, re := range ex.Rows {
		for s, c := range re.Stages {
			n[s] += c
		}
	}
	names := make([]string, 0, len(n))
	for s := range n {
		names = append(names, s)
	}
	sort.Slice(names, func(i, j int) bool {
		if n[names[i]] != n[names[j]] {
			return n[names[i]] > n[names[j]]
		}
		return names[i] < names[j]
	})
	out := make([]string, len(names))
	for i, s := range names {
		out[i] = fmt.Sprintf("%s %d", s, n[s])
	}
	return out
}

func stageCell(e Evidence) string {
	if e.Stage == "" {
		return "-"
	}
	return e.Stage + " " + us(e.StageNs)
}

func us(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e3) }

func optUs(ns int64) string {
	if ns < 0 {
		return "-"
	}
	return us(ns)
}

func optN(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func queueCell(e Evidence) string {
	if e.StartedInCall {
		return us(e.QueueCallNs) + "*"
	}
	return us(e.QueueCallNs)
}
