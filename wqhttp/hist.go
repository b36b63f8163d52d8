package wqhttp

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace/analyze"
)

// HistReport is the body of /hist?format=json.
type HistReport struct {
	Workqueues []HistQueue `json:"workqueues"`
}

// HistQueue holds one workqueue's two latency histograms.
type HistQueue struct {
	Name string `json:"name"`
	// Latency is queue-to-start: workqueue_queue_work to
	// workqueue_execute_start, what the kernel's workqueue threads call
	// scheduling latency.
	Latency HistSummary `json:"latency"`
	// Exec is execution time: workqueue_execute_start to
	// workqueue_execute_end.
	Exec HistSummary `json:"exec"`
}

// HistSummary is one histogram: its totals, percentiles read from it (each
// the upper bound of the bucket that holds it, so within 12.5%), its
// buckets as wq keeps them, and the same counts regrouped in bcc's log2
// buckets of microseconds.
type HistSummary struct {
	Count  int64   `json:"count"`
	SumNs  int64   `json:"sum_ns"`
	MeanNs float64 `json:"mean_ns"`
	P50Ns  int64   `json:"p50_ns"`
	P90Ns  int64   `json:"p90_ns"`
	P99Ns  int64   `json:"p99_ns"`
	P999Ns int64   `json:"p999_ns"`
	MaxNs  int64   `json:"max_ns"`
	// Buckets are the non-empty buckets, each [lower_ns, next lower_ns).
	Buckets []HistBucket `json:"buckets"`
	// Log2Us[i] counts the observations in bcc's bucket i (0-1 us, 2-3,
	// 4-7, ...), each snapshot bucket counted at its lower bound.
	Log2Us []uint64 `json:"log2_us"`
}

// HistBucket is one bucket of a HistSummary.
type HistBucket struct {
	LowerNs int64 `json:"lower_ns"`
	Count   int64 `json:"count"`
}

// Hist returns the latency histograms of every live workqueue
// (wq.Queues(false)) whose name filter matches (all when filter is nil),
// sorted by name. It never blocks on work items.
func Hist(filter *regexp.Regexp) HistReport {
	rep := HistReport{Workqueues: []HistQueue{}}
	for _, q := range wq.Queues(false) {
		if filter != nil && !filter.MatchString(q.Name()) {
			continue
		}
		st := q.Stats()
		rep.Workqueues = append(rep.Workqueues, HistQueue{Name: st.Name, Latency: summarize(st.Latency), Exec: summarize(st.Exec)})
	}
	return rep
}

func summarize(h wq.HistSnapshot) HistSummary {
	s := HistSummary{Count: h.Count, SumNs: h.SumNs, MeanNs: h.MeanNs(), MaxNs: h.MaxNs,
		P50Ns: h.Quantile(0.5), P90Ns: h.Quantile(0.9), P99Ns: h.Quantile(0.99), P999Ns: h.Quantile(0.999),
		Buckets: []HistBucket{}, Log2Us: []uint64{}}
	var l2 analyze.Log2Hist
	for _, b := range h.Buckets {
		s.Buckets = append(s.Buckets, HistBucket{LowerNs: b.LowerNs, Count: b.Count})
		if b.Count <= 0 {
			continue
		}
		i := analyze.Bucket(uint64(max(b.LowerNs, 0)) / 1000)
		for len(l2.Buckets) <= i {
			l2.Buckets = append(l2.Buckets, 0)
		}
		l2.Buckets[i] += uint64(b.Count)
	}
	if l2.Buckets != nil {
		s.Log2Us = l2.Buckets
	}
	return s
}

func (h *handler) hist(w http.ResponseWriter, r *http.Request) {
	if !checkFormat(w, r) {
		return
	}
	re, ok := queueFilter(w, r)
	if !ok {
		return
	}
	if name := r.URL.Query().Get("wq"); name != "" {
		if re != nil {
			http.Error(w, "wqhttp: give wq or filter, not both", http.StatusBadRequest)
			return
		}
		re = regexp.MustCompile("^" + regexp.QuoteMeta(name) + "$")
	}
	rep := Hist(re)
	if wantJSON(r) {
		writeJSON(w, rep)
		return
	}
	textHeader(w)
	_, _ = w.Write([]byte(rep.text()))
}

// text renders each queue with items as two bcc-style log2 histograms.
func (rep HistReport) text() string {
	var b strings.Builder
	idle := 0
	for _, q := range rep.Workqueues {
		if q.Latency.Count == 0 && q.Exec.Count == 0 {
			idle++
			continue
		}
		for _, part := range []struct {
			what string
			s    HistSummary
		}{{"queue->start latency", q.Latency}, {"execution time", q.Exec}} {
			s := part.s
			fmt.Fprintf(&b, "workqueue %s: %s, %d items, avg %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n",
				q.Name, part.what, s.Count, s.MeanNs/1e3, us(s.P50Ns), us(s.P99Ns), us(s.MaxNs))
			l2 := analyze.Log2Hist{Buckets: s.Log2Us}
			_ = l2.WriteText(&b, "usecs")
			b.WriteByte('\n')
		}
	}
	if len(rep.Workqueues) == 0 {
		b.WriteString("no workqueues\n")
	} else if idle > 0 {
		fmt.Fprintf(&b, "%d workqueues without items not shown\n", idle)
	}
	return b.String()
}

func us(ns int64) float64 { return float64(ns) / 1e3 }
