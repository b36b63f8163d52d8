package analyze

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gowq/wq/wqtrace"
)

// TextOptions selects what Report.WriteText prints. The zero value prints
// the summary, the per-workqueue table and the per-function table, all rows,
// without histograms.
type TextOptions struct {
	// Top limits each table to its first Top rows (by count); 0 means all.
	Top int
	// HideFunctions leaves out the per-(workqueue, function) table.
	HideFunctions bool
	// Histograms adds bcc-style log2 histograms of queue-to-start, one per
	// workqueue in the per-workqueue table (limited by Top too).
	Histograms bool
}

// maxNameWidth caps the name column of the tables; longer names are cut
// with a trailing '~'.
const maxNameWidth = 48

// WriteText writes the report as plain-text tables, times in microseconds:
// a summary line with event and unmatched counts, then one table per
// workqueue and one per (workqueue, function), sorted by count descending.
// Each item row shows count, queued and the four latencies (queue->activate,
// activate->start, queue->start, execution), each with min, p50, p90, p99,
// p99.9, max, avg and stdev. It returns the first write error.
func (r *Report) WriteText(w io.Writer, opts TextOptions) error {
	bw := bufio.NewWriter(w)
	span := float64(r.LastNs-r.FirstNs) / 1e9
	fmt.Fprintf(bw, "events: %d (queue %d, activate %d, start %d, end %d) over %.6f s; items: %d\n",
		r.Events, r.ByKind[wqtrace.QueueWork], r.ByKind[wqtrace.ActivateWork],
		r.ByKind[wqtrace.ExecuteStart], r.ByKind[wqtrace.ExecuteEnd], span, len(r.Items))
	u := r.Unmatched
	fmt.Fprintf(bw, "unmatched: queue %d (superseded %d), activate %d, start %d, end %d, no end %d\n",
		u.Queue, u.Superseded, u.Activate, u.Start, u.End, u.NoEnd)

	wqs := limit(r.Workqueues, opts.Top)
	if r.Total != nil {
		wqs = append([]*Group{r.Total}, wqs...)
	}
	fmt.Fprintf(bw, "\nper workqueue (us)\n")
	writeTable(bw, "workqueue", wqs, opts.Histograms)
	if !opts.HideFunctions {
		fmt.Fprintf(bw, "\nper function (us)\n")
		writeTable(bw, "workqueue/function", limit(r.Functions, opts.Top), false)
	}
	return bw.Flush()
}

func limit(gs []*Group, top int) []*Group {
	if top > 0 && len(gs) > top {
		return gs[:top]
	}
	return gs
}

func groupName(g *Group) string {
	if g.Function == "" {
		return g.Workqueue
	}
	return g.Workqueue + "/" + g.Function
}

func writeTable(w io.Writer, title string, gs []*Group, hist bool) {
	nw := len(title)
	for _, g := range gs {
		nw = max(nw, len(groupName(g)))
	}
	nw = min(nw, maxNameWidth)
	fmt.Fprintf(w, "%-*s %7s %7s  %-15s %9s %9s %9s %9s %9s %9s %9s %9s\n",
		nw, title, "count", "queued", "latency", "min", "p50", "p90", "p99", "p99.9", "max", "avg", "stdev")
	for _, g := range gs {
		name := groupName(g)
		if len(name) > nw {
			name = name[:nw-1] + "~"
		}
		rows := []struct {
			label string
			s     *Stats
		}{
			{"queue->start", &g.QueueToStart},
			{"queue->activate", &g.QueueToActivate},
			{"activate->start", &g.ActivateToStart},
			{"execution", &g.Exec},
		}
		for i, row := range rows {
			lead := fmt.Sprintf("%-*s %7d %7d", nw, name, g.Count, g.Queued)
			if i > 0 {
				lead = strings.Repeat(" ", len(lead))
			}
			s := row.s
			if s.Count == 0 {
				fmt.Fprintf(w, "%s  %-15s %9s\n", lead, row.label, "-")
				continue
			}
			fmt.Fprintf(w, "%s  %-15s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
				lead, row.label, s.Min, s.P50, s.P90, s.P99, s.P999, s.Max, s.Avg, s.Stdev)
		}
		if hist && g.Hist != nil && g.Hist.Total() > 0 {
			fmt.Fprintf(w, "\n%s queue->start:\n", name)
			_ = g.Hist.WriteText(w, "usecs") // errors surface at Flush
			fmt.Fprintln(w)
		}
	}
}

// WriteJSON writes the report as one indented JSON object (Items left out;
// durations in us as the Stats field names say, timestamps in ns). It
// returns the first write or encoding error.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
