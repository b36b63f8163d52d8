package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a real wqhttp handler on loopback with a queue that has run
// n items.
func serve(t *testing.T, name string, n int) *httptest.Server {
	t.Helper()
	q, err := wq.Alloc(name, wq.PerCPU, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	for range n {
		q.Queue(wq.NewWork(func() { time.Sleep(50 * time.Microsecond) }))
	}
	q.Flush()
	mux := http.NewServeMux()
	mux.Handle("/debug/wq/", wqhttp.Handler(wqhttp.Options{Prefix: "/debug/wq"}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func runCmd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(ctx, args, &o, &e)
	return code, o.String(), e.String()
}

// rowsOf returns the table rows of queue name in output, in order.
func rowsOf(out, name string) [][]string {
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 9 && f[0] == name {
			rows = append(rows, f)
		}
	}
	return rows
}

func TestTableDeltas(t *testing.T) {
	srv := serve(t, "wqmon_t", 25)
	code, out, errOut := runCmd(t, context.Background(), "-i", "0.02", "-n", "3", srv.URL+"/debug/wq", "^wqmon_")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if n := strings.Count(out, "total  infl  CPUtime CPUitsv CMW/RPR  mayday rescued     ESC"); n != 3 {
		t.Errorf("%d headers, want 3:\n%s", n, out)
	}
	rows := rowsOf(out, "wqmon_t")
	if len(rows) != 3 {
		t.Fatalf("%d rows for wqmon_t, want 3:\n%s", len(rows), out)
	}
	// First sample: the totals; later ones: no new work, deltas 0.
	if rows[0][1] != "25" || rows[0][2] != "0" {
		t.Errorf("first row %q, want total 25 infl 0", rows[0])
	}
	for _, r := range rows[1:] {
		if r[1] != "0" {
			t.Errorf("later row %q, want delta 0", r)
		}
	}
	if !strings.Contains(errOut, "live page: "+srv.URL+"/debug/wq/ui\n") {
		t.Errorf("stderr lacks the live page's URL: %q", errOut)
	}
	if !strings.Contains(errOut, "per-interval deltas") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestCumulativeAndJSON(t *testing.T) {
	srv := serve(t, "wqmon_c", 9)
	code, out, errOut := runCmd(t, context.Background(), "-c", "-i", "0.01", "-n", "2", srv.URL+"/debug/wq/", "wqmon_c")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	rows := rowsOf(out, "wqmon_c")
	if len(rows) != 2 || rows[0][1] != "9" || rows[1][1] != "9" {
		t.Errorf("cumulative rows %q, want total 9 twice", rows)
	}

	code, out, errOut = runCmd(t, context.Background(), "-j", "-i", "0.01", "-n", "2", srv.URL+"/debug/wq/monitor", "^wqmon_c$")
	if code != 0 {
		t.Fatalf("-j exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("-j printed %d lines, want 2:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var r jsonRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if r.Name != "wqmon_c" || r.Started != 9 || r.Timestamp <= 0 {
			t.Errorf("json row %+v", r)
		}
	}
}

func TestOnceWithZeroInterval(t *testing.T) {
	srv := serve(t, "wqmon_once", 3)
	code, out, _ := runCmd(t, context.Background(), "-i", "0", srv.URL+"/debug/wq")
	if code != 0 || len(rowsOf(out, "wqmon_once")) != 1 {
		t.Errorf("-i 0: exit %d, output:\n%s", code, out)
	}
}

func TestInterruptStops(t *testing.T) {
	srv := serve(t, "wqmon_int", 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	done := make(chan int, 1)
	go func() {
		var o, e bytes.Buffer
		done <- run(ctx, []string{"-i", "0.01", srv.URL + "/debug/wq"}, &o, &e)
	}()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after interrupt, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("wqmon did not stop after its context was cancelled")
	}
}

func TestUsageAndFetchErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-i", "-1", "http://127.0.0.1:1"},
		{"-n", "-2", "http://127.0.0.1:1"},
		{"ftp://x"},
		{"http://127.0.0.1:1", "("},
		{"-bogus"},
	} {
		if code, _, _ := runCmd(t, context.Background(), args...); code != 2 {
			t.Errorf("args %q: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := runCmd(t, context.Background(), "-h"); code != 0 {
		t.Errorf("-h: exit %d, want 0", code)
	}
	// Nothing listens there (port 1 on loopback).
	code, _, errOut := runCmd(t, context.Background(), "-n", "1", "http://127.0.0.1:1/debug/wq")
	if code != 1 || !strings.Contains(errOut, "wqmon:") {
		t.Errorf("unreachable: exit %d, stderr %q, want 1", code, errOut)
	}
	// A server that is not wqhttp.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	code, _, errOut = runCmd(t, context.Background(), "-n", "1", srv.URL)
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("404 server: exit %d, stderr %q", code, errOut)
	}
}

func TestDemo(t *testing.T) {
	code, out, errOut := runCmd(t, context.Background(), "-demo", "-i", "0.2", "-n", "3", "^demo_")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, q := range []string{"demo_percpu", "demo_highpri", "demo_unbound", "demo_reclaim"} {
		rows := rowsOf(out, q)
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want 3:\n%s", q, len(rows), out)
		}
		var total int
		for _, r := range rows {
			if r[1] != "0" {
				total++
			}
		}
		if total == 0 {
			t.Errorf("%s: no work in any of 3 samples:\n%s", q, out)
		}
	}
	if !regexp.MustCompile(`live page: http://127\.0\.0\.1:\d+/debug/wq/ui\n`).MatchString(errOut) {
		t.Errorf("stderr lacks the live page's URL: %q", errOut)
	}
	if !strings.Contains(errOut, "demo workload served at http://127.0.0.1:") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestDeltas(t *testing.T) {
	prev := map[string]wqhttp.MonitorRow{}
	rows := []wqhttp.MonitorRow{{Name: "a", Started: 10, Completed: 9, Infl: 1, CPUTimeUs: 100, CMWakeup: 3}, {Name: "a", Started: 5, Completed: 5}}
	out, cur := deltas(prev, rows)
	if out[0].Started != 10 || out[1].Started != 5 {
		t.Errorf("first deltas %+v", out)
	}
	rows = []wqhttp.MonitorRow{{Name: "a", Started: 15, Completed: 15, Infl: 0, CPUTimeUs: 150, CMWakeup: 4}, {Name: "a", Started: 2, Completed: 2}}
	out, _ = deltas(cur, rows)
	if d := out[0]; d.Started != 5 || d.Completed != 6 || d.CPUTimeUs != 50 || d.CMWakeup != 1 || d.Infl != 0 {
		t.Errorf("delta %+v", d)
	}
	// The second "a" went down: a new queue took the name; show its totals.
	if d := out[1]; d.Started != 2 {
		t.Errorf("reset queue delta %+v", d)
	}
}
