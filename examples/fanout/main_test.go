package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gowq/wq"
)

// TestFanout catches a fan-out that does not answer 200 when every block
// verifies, or that does not report the first bad block.
func TestFanout(t *testing.T) {
	q, err := wq.Alloc("fanout-test", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	h := handler(q)
	for _, c := range []struct {
		query string
		code  int
		body  string
	}{{"", http.StatusOK, "16 blocks verified"}, {"?bad=7", http.StatusBadGateway, "block 7: bad checksum"}} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest("GET", "/"+c.query, nil))
		if rec.Code == http.StatusBadGateway && strings.Contains(rec.Body.String(), "deadline") {
			continue // a machine too loaded for 16 x 1 ms in 50 ms: not this test's failure
		}
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("GET /%s = %d %q, want %d %q", c.query, rec.Code, rec.Body.String(), c.code, c.body)
		}
	}
}

// BenchmarkFanoutClasses measures the handler's latency per request (16
// lookups of 1 ms under the 50 ms deadline) on each worker class, and on
// errgroup's goroutines for reference: p50, p99 and max in ms over b.N
// requests. The figures in docs/go-users.md ("Which queue for which
// work") come from
//
//	go test -run '^$' -bench FanoutClasses -benchtime 300x -count 3 ./examples/fanout
func BenchmarkFanoutClasses(b *testing.B) {
	type class struct {
		name  string
		flags wq.Flags
		opts  []wq.Option
	}
	for _, c := range []class{
		{"default", wq.Unbound, nil},
		{"threads", wq.Unbound, []wq.Option{wq.Threads()}},
		{"highpri", wq.Unbound | wq.HighPri, nil},
		{"percpu", 0, nil},
		{"rt", wq.Unbound | wq.RT, nil},
		{"errgroup", 0, nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			var h http.HandlerFunc
			if c.name == "errgroup" {
				h = errgroupHandler
			} else {
				q, err := wq.Alloc("fanout-"+c.name, c.flags, 0, c.opts...)
				if errors.Is(err, wq.ErrPermission) {
					b.Skipf("%s: %v", c.name, err)
				}
				if err != nil {
					b.Fatal(err)
				}
				defer q.Destroy()
				h = handler(q)
			}
			lat := make([]time.Duration, 0, b.N)
			failed := 0
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				start := time.Now()
				h(rec, httptest.NewRequest("GET", "/", nil))
				lat = append(lat, time.Since(start))
				if rec.Code != http.StatusOK {
					failed++
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
			b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
			b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
			b.ReportMetric(float64(failed), "failed")
		})
	}
}

// errgroupHandler is handler written with errgroup's goroutines, the
// reference row of BenchmarkFanoutClasses.
func errgroupHandler(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	for blk := 1; blk <= 16; blk++ {
		g.Go(func() error { return verify(ctx, blk, 0) })
	}
	if err := g.Wait(); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	fmt.Fprintln(w, "16 blocks verified")
}
