package wqhttp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

func TestHist(t *testing.T) {
	q := alloc(t, "wh_hist", wq.PerCPU)
	run(q, 20, func() { time.Sleep(100 * time.Microsecond) })
	srv := server(t, wqhttp.Options{})
	r := get(t, srv, "/hist")
	mustOK(t, r, "GET /hist")
	for _, s := range []string{"workqueue wh_hist: queue->start latency, 20 items", "workqueue wh_hist: execution time, 20 items",
		"usecs", "distribution", "|*"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("/hist lacks %q:\n%s", s, r.body)
		}
	}
	rep := decode[wqhttp.HistReport](t, get(t, srv, "/hist?wq=wh_hist&format=json"))
	if len(rep.Workqueues) != 1 {
		t.Fatalf("?wq=wh_hist gave %d queues", len(rep.Workqueues))
	}
	h := rep.Workqueues[0]
	for _, s := range []wqhttp.HistSummary{h.Latency, h.Exec} {
		var nb int64
		var nl uint64
		for _, b := range s.Buckets {
			nb += b.Count
		}
		for _, c := range s.Log2Us {
			nl += c
		}
		if s.Count != 20 || nb != 20 || nl != 20 || s.P50Ns > s.P99Ns || s.P99Ns > s.MaxNs {
			t.Errorf("summary %+v: count %d, buckets %d, log2 %d", s, s.Count, nb, nl)
		}
	}
	// Every item slept >= 100 us: no execution below the 64-127 us bucket.
	for i, c := range h.Exec.Log2Us {
		if i < 6 && c != 0 {
			t.Errorf("execution log2 bucket %d (< 64 us) has %d items", i, c)
		}
	}
	if r := get(t, srv, "/hist?wq=x&filter=y"); r.code != http.StatusBadRequest {
		t.Errorf("wq and filter: %d, want 400", r.code)
	}
	rep = decode[wqhttp.HistReport](t, get(t, srv, "/hist?wq=no_such_queue&format=json"))
	if len(rep.Workqueues) != 0 {
		t.Errorf("unknown wq: %+v", rep)
	}
}
