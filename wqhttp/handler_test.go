package wqhttp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqhttp"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func alloc(t *testing.T, name string, flags wq.Flags) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, 0)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", name, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

func run(q *wq.Workqueue, n int, fn func()) {
	for range n {
		q.Queue(wq.NewWork(fn))
	}
	q.Flush()
}

func server(t *testing.T, opts wqhttp.Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(wqhttp.Handler(opts))
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	code  int
	body  string
	ctype string
}

func do(t *testing.T, srv *httptest.Server, method, path, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{resp.StatusCode, string(b), resp.Header.Get("Content-Type")}
}

func get(t *testing.T, srv *httptest.Server, path string) reply {
	t.Helper()
	return do(t, srv, http.MethodGet, path, "")
}

func mustOK(t *testing.T, r reply, what string) {
	t.Helper()
	if r.code != http.StatusOK {
		t.Fatalf("%s: status %d, body %q", what, r.code, r.body)
	}
}

func decode[T any](t *testing.T, r reply) T {
	t.Helper()
	var v T
	if !strings.HasPrefix(r.ctype, "application/json") {
		t.Errorf("Content-Type %q, want application/json", r.ctype)
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
	return v
}

func TestIndexAndPrefix(t *testing.T) {
	srv := server(t, wqhttp.Options{})
	r := get(t, srv, "/")
	mustOK(t, r, "GET /")
	for _, s := range []string{`href="monitor"`, `href="dump"`, `href="hist"`, `href="attrs"`, "writes disabled"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("index lacks %q:\n%s", s, r.body)
		}
	}
	if !strings.HasPrefix(r.ctype, "text/html") {
		t.Errorf("index Content-Type %q", r.ctype)
	}
	if r := get(t, srv, "/nosuch"); r.code != http.StatusNotFound {
		t.Errorf("GET /nosuch: %d, want 404", r.code)
	}
	if r := do(t, srv, http.MethodPost, "/monitor", ""); r.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /monitor: %d, want 405", r.code)
	}

	// Mounted under a prefix on the program's own mux, like pprof.
	mux := http.NewServeMux()
	mux.Handle("/debug/wq/", wqhttp.Handler(wqhttp.Options{Prefix: "/debug/wq/"}))
	psrv := httptest.NewServer(mux)
	t.Cleanup(psrv.Close)
	mustOK(t, get(t, psrv, "/debug/wq/"), "GET /debug/wq/")
	mustOK(t, get(t, psrv, "/debug/wq/monitor"), "GET /debug/wq/monitor")
	// The bare prefix redirects to the index under a slash (relative links).
	if r := get(t, psrv, "/debug/wq"); r.code != http.StatusOK || !strings.Contains(r.body, `href="monitor"`) {
		t.Errorf("GET /debug/wq: %d", r.code)
	}
	h := wqhttp.Handler(wqhttp.Options{Prefix: "/debug/wq"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/wq?format=json", nil))
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "/debug/wq/?format=json" {
		t.Errorf("bare prefix: %d Location %q, want 301 to /debug/wq/?format=json", rec.Code, rec.Header().Get("Location"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/wqx/monitor", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("/debug/wqx/monitor: %d, want 404", rec.Code)
	}
	if r := get(t, psrv, "/monitor"); r.code != http.StatusNotFound {
		t.Errorf("GET /monitor outside the prefix: %d, want 404", r.code)
	}
	// The same behind http.StripPrefix with no Prefix.
	mux2 := http.NewServeMux()
	mux2.Handle("/x/", http.StripPrefix("/x", wqhttp.Handler(wqhttp.Options{})))
	ssrv := httptest.NewServer(mux2)
	t.Cleanup(ssrv.Close)
	mustOK(t, get(t, ssrv, "/x/dump"), "GET /x/dump")
}

func TestMonitor(t *testing.T) {
	plain := alloc(t, "wh_plain", wq.PerCPU)
	unb := alloc(t, "wh_mon_unbound", wq.Unbound|wq.MemReclaim)
	run(plain, 12, func() {})
	run(unb, 5, func() {})
	srv := server(t, wqhttp.Options{})

	r := get(t, srv, "/monitor")
	mustOK(t, r, "GET /monitor")
	lines := strings.Split(strings.TrimRight(r.body, "\n"), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC" {
		t.Errorf("header %q", lines[0])
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	// name total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC
	if f := rows["wh_plain"]; len(f) != 9 || f[1] != "12" || f[2] != "0" || f[4] == "-" || f[6] != "-" || f[7] != "-" || f[8] != "-" {
		t.Errorf("wh_plain row %q, want total 12, infl 0, CPUitsv a number, mayday/rescued -", f)
	}
	if f := rows["wh_mon_unbound"]; len(f) != 9 || f[1] != "5" || f[4] != "-" || f[6] == "-" {
		t.Errorf("wh_mon_unbound row %q, want total 5, CPUitsv -, mayday a number", f)
	}

	s := decode[wqhttp.MonitorSample](t, get(t, srv, "/monitor?format=json"))
	if s.Timestamp < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("timestamp %v", s.Timestamp)
	}
	found := false
	for _, row := range s.Workqueues {
		if row.Name == "wh_plain" {
			found = true
			if row.Started != 12 || row.Completed != 12 || row.Infl != 0 || row.Unbound || row.Flags != "PERCPU" || row.Policy != "normal" {
				t.Errorf("wh_plain json %+v", row)
			}
		}
	}
	if !found {
		t.Error("wh_plain (not Sysfs) missing from /monitor: every live queue must be shown")
	}
	s = decode[wqhttp.MonitorSample](t, get(t, srv, "/monitor?format=json&filter=^wh_mon_"))
	if len(s.Workqueues) != 1 || s.Workqueues[0].Name != "wh_mon_unbound" || !s.Workqueues[0].Unbound || !s.Workqueues[0].MemReclaim {
		t.Errorf("filtered: %+v", s.Workqueues)
	}
	if r := get(t, srv, "/monitor?filter=("); r.code != http.StatusBadRequest {
		t.Errorf("bad filter: %d, want 400", r.code)
	}
	if r := get(t, srv, "/monitor?format=xml"); r.code != http.StatusBadRequest {
		t.Errorf("bad format: %d, want 400", r.code)
	}
}

func TestFormatMonitorRow(t *testing.T) {
	row := wqhttp.MonitorRow{Name: "a_very_long_workqueue_name_over_24", Started: 18545, Infl: 1, CPUTimeUs: 6_100_000, CPUIntensive: 2, CMWakeup: 5}
	got := wqhttp.FormatMonitorRow(row)
	want := "g_workqueue_name_over_24    18545     1    6.100       2       5       -       -       -"
	if got != want {
		t.Errorf("FormatMonitorRow:\n got %q\nwant %q", got, want)
	}
	row.EscapeAfterUs, row.Escaped = 50, 7
	if f := strings.Fields(wqhttp.FormatMonitorRow(row)); f[len(f)-1] != "7" {
		t.Errorf("escaping row %q, want ESC 7", f)
	}
	row = wqhttp.MonitorRow{Name: "u", Unbound: true, MemReclaim: true, Repatriated: 3, Mayday: 4, Rescued: 5}
	if f := strings.Fields(wqhttp.FormatMonitorRow(row)); strings.Join(f, " ") != "u 0 0 0.000 - 3 4 5 -" {
		t.Errorf("unbound row %q", f)
	}
}

func blockOn(ch chan struct{}) func() { return func() { <-ch } }

func TestDump(t *testing.T) {
	q := alloc(t, "wh_dump", wq.PerCPU)
	strict := alloc(t, "wh_dump_strict", wq.Unbound)
	if err := strict.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}
	run(strict, 1, func() {})
	release := make(chan struct{})
	busy := wq.NewWork(blockOn(release))
	q.QueueOn(0, busy)
	t.Cleanup(func() { close(release); q.Flush() })
	for busy.Busy()&wq.BusyRunning == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	srv := server(t, wqhttp.Options{})

	r := get(t, srv, "/dump")
	mustOK(t, r, "GET /dump")
	for _, s := range []string{"Affinity Scopes", "wq_unbound_cpumask=", "CPU\n  nr_pods", "SYSTEM\n  nr_pods  1",
		"Worker Pools", "Workqueue CPU -> pool", "idle/workers=", "cpu=  0", "wh_dump                  percpu",
		"wh_dump_strict           unbound,S", "blockOn", "running for"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("/dump lacks %q:\n%s", s, r.body)
		}
	}

	d := decode[wqhttp.DumpReport](t, get(t, srv, "/dump?format=json"))
	if len(d.AffinityPods["system"]) != 1 || len(d.AffinityPods["cpu"]) != len(wq.OnlineCPUs()) {
		t.Errorf("affinity pods %v, online %v", d.AffinityPods, wq.OnlineCPUs())
	}
	pools := map[int]wqhttp.DumpPool{}
	for _, p := range d.Pools {
		pools[p.ID] = p
		if p.Idle > p.NrWorkers || p.NrWorkers != len(p.Workers) || p.Policy == "" || p.CPUs == "" {
			t.Errorf("pool %+v inconsistent", p)
		}
	}
	var dq *wqhttp.DumpQueue
	for i := range d.Workqueues {
		if d.Workqueues[i].Name == "wh_dump" {
			dq = &d.Workqueues[i]
		}
	}
	if dq == nil {
		t.Fatal("wh_dump missing from /dump")
	}
	if dq.Type != "percpu" || len(dq.PoolIDs) < len(wq.OnlineCPUs()) {
		t.Fatalf("wh_dump %+v", dq)
	}
	p0, ok := pools[dq.PoolIDs[0]]
	if !ok {
		t.Fatalf("pool %d serving wh_dump on CPU 0 not listed", dq.PoolIDs[0])
	}
	// The class asks for nice 0; the workers run at 0, or at the
	// inherited nice when the process may not lower it (unprivileged
	// under nice -n 19): Nice is what they really run at.
	if p0.CPU != 0 || p0.Class != "normal" || p0.AskedNice != 0 || p0.Policy != "SCHED_OTHER" {
		t.Errorf("CPU 0 pool %+v", p0)
	}
	var running *wqhttp.DumpWorker
	for i, w := range p0.Workers {
		if !w.Idle && strings.Contains(w.Func, "blockOn") {
			running = &p0.Workers[i]
		}
	}
	if running == nil {
		t.Fatalf("no worker of pool %d running blockOn: %+v", p0.ID, p0.Workers)
	}
	if running.TID <= 0 || running.RunningNs <= 0 || !strings.HasPrefix(running.Name, "kworker/0:") {
		t.Errorf("running worker %+v", running)
	}
	if a, err := sched.GetAttr(running.TID); err != nil {
		t.Errorf("reading worker %d's nice: %v", running.TID, err)
	} else if a.Nice != p0.Nice {
		t.Errorf("pool %d says nice %d, its worker %d runs at %d", p0.ID, p0.Nice, running.TID, a.Nice)
	}
}

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

func TestAttrsRead(t *testing.T) {
	sq := alloc(t, "wh_sysfs", wq.PerCPU|wq.Sysfs)
	alloc(t, "wh_hidden", wq.PerCPU)
	uq := alloc(t, "wh/slash", wq.Unbound|wq.Sysfs)
	srv := server(t, wqhttp.Options{})

	r := get(t, srv, "/attrs")
	mustOK(t, r, "GET /attrs")
	for _, s := range []string{"global\n", "  watchdog_thresh = ", "workqueue wh_sysfs\n  per_cpu = 1\n  max_active = 1024\n  policy = normal\n",
		"workqueue wh/slash\n", "  affinity_scope = default"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("/attrs lacks %q:\n%s", s, r.body)
		}
	}
	if strings.Contains(r.body, "wh_hidden") {
		t.Error("/attrs shows a queue without wq.Sysfs")
	}
	rep := decode[wqhttp.AttrsReport](t, get(t, srv, "/attrs?format=json"))
	if want, _ := wq.GlobalAttr("watchdog_thresh"); rep.Global["watchdog_thresh"] != want {
		t.Errorf("global watchdog_thresh %q, want %q", rep.Global["watchdog_thresh"], want)
	}
	names := map[string]map[string]string{}
	for _, qa := range rep.Workqueues {
		names[qa.Name] = qa.Attrs
	}
	if names["wh_sysfs"]["per_cpu"] != "1" || names["wh/slash"]["per_cpu"] != "0" || names["wh_hidden"] != nil {
		t.Errorf("json attrs %v", names)
	}

	for path, want := range map[string]string{
		"/attrs/wh_sysfs/max_active":      strconv.Itoa(sq.MaxActive()) + "\n",
		"/attrs/wh/slash/affinity_strict": "0\n",
		"/attrs/wh/slash/per_cpu":         "0\n",
	} {
		if r := get(t, srv, path); r.code != http.StatusOK || r.body != want {
			t.Errorf("GET %s: %d %q, want 200 %q", path, r.code, r.body, want)
		}
	}
	g, _ := wq.GlobalAttr("cpu_intensive_thresh_us")
	if r := get(t, srv, "/attrs/global/cpu_intensive_thresh_us"); r.body != g+"\n" {
		t.Errorf("global read %q, want %q", r.body, g)
	}
	mustOK(t, get(t, srv, "/attrs/global"), "GET /attrs/global")
	if r := get(t, srv, "/attrs/wh_sysfs"); r.code != http.StatusOK || !strings.Contains(r.body, "max_active = ") {
		t.Errorf("GET /attrs/wh_sysfs: %d %q", r.code, r.body)
	}
	for _, p := range []string{"/attrs/wh_hidden/max_active", "/attrs/wh_hidden", "/attrs/nosuch/max_active",
		"/attrs/wh_sysfs/nice" /* unbound-only */, "/attrs/wh_sysfs/bogus", "/attrs/global/bogus"} {
		if r := get(t, srv, p); r.code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, r.code)
		}
	}
	_ = uq
}

func TestAttrsWriteDisabled(t *testing.T) {
	q := alloc(t, "wh_ro", wq.PerCPU|wq.Sysfs)
	srv := server(t, wqhttp.Options{})
	for _, m := range []string{http.MethodPost, http.MethodPut} {
		r := do(t, srv, m, "/attrs/wh_ro/max_active", "5")
		if r.code != http.StatusForbidden || !strings.Contains(r.body, "disabled") {
			t.Errorf("%s with writes disabled: %d %q, want 403", m, r.code, r.body)
		}
	}
	if r := do(t, srv, http.MethodPost, "/attrs/global/watchdog_thresh", "5"); r.code != http.StatusForbidden {
		t.Errorf("global POST with writes disabled: %d", r.code)
	}
	if q.MaxActive() != wq.DefaultMaxActive {
		t.Errorf("max_active changed to %d with writes disabled", q.MaxActive())
	}
}

func TestAttrsWrite(t *testing.T) {
	q := alloc(t, "wh_rw", wq.PerCPU|wq.Sysfs)
	uq := alloc(t, "wh_rw_unbound", wq.Unbound|wq.Sysfs)
	hidden := alloc(t, "wh_rw_hidden", wq.PerCPU)
	srv := server(t, wqhttp.Options{AllowWrites: true})

	if r := do(t, srv, http.MethodPost, "/attrs/wh_rw/max_active", "5\n"); r.code != http.StatusOK || r.body != "5\n" {
		t.Errorf("POST max_active 5: %d %q", r.code, r.body)
	}
	if q.MaxActive() != 5 {
		t.Errorf("MaxActive %d after POST 5", q.MaxActive())
	}
	if r := do(t, srv, http.MethodPut, "/attrs/wh_rw/max_active", "6"); r.code != http.StatusOK || q.MaxActive() != 6 {
		t.Errorf("PUT max_active 6: %d %q, MaxActive %d", r.code, r.body, q.MaxActive())
	}
	// Work still runs with the new limit.
	run(q, 3, func() {})
	// escape_after (a gowq extension) is a per-CPU queue's attribute.
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rw/escape_after", "50us"); r.code != http.StatusOK || r.body != "50us\n" || q.Attrs().EscapeAfter != 50*time.Microsecond {
		t.Errorf("POST escape_after 50us: %d %q, EscapeAfter %v", r.code, r.body, q.Attrs().EscapeAfter)
	}

	type bad struct {
		path, value string
		code        int
		text        string
	}
	for _, c := range []bad{
		{"/attrs/wh_rw/max_active", "abc", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw/max_active", "0", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw/max_active", "99999", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw/policy", "bogus", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw/per_cpu", "0", http.StatusConflict, "read-only"},
		{"/attrs/wh_rw/nice", "1", http.StatusNotFound, "no attribute"},
		{"/attrs/nosuch/max_active", "1", http.StatusNotFound, "no Sysfs workqueue"},
		{"/attrs/wh_rw_hidden/max_active", "1", http.StatusNotFound, "no Sysfs workqueue"},
		{"/attrs/wh_rw", "1", http.StatusNotFound, "write to /attrs/<queue>/<attr>"},
		{"/attrs/wh_rw_unbound/nice", "100", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw_unbound/affinity_scope", "bogus", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw_unbound/affinity_strict", "2", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw_unbound/cpumask", "zz", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw/escape_after", "-1ms", http.StatusBadRequest, "invalid argument"},
		{"/attrs/wh_rw_unbound/escape_after", "50us", http.StatusNotFound, "no attribute"},
		{"/attrs/global/cpu_intensive_thresh_us", "-1", http.StatusBadRequest, "invalid argument"},
		{"/attrs/global/watchdog_thresh", "soon", http.StatusBadRequest, "invalid argument"},
		{"/attrs/global/bogus", "1", http.StatusNotFound, "no global attribute"},
	} {
		r := do(t, srv, http.MethodPost, c.path, c.value)
		if r.code != c.code || !strings.Contains(r.body, c.text) {
			t.Errorf("POST %s %q: %d %q, want %d containing %q", c.path, c.value, r.code, r.body, c.code, c.text)
		}
	}
	if q.MaxActive() != 6 {
		t.Errorf("a failed write changed max_active to %d", q.MaxActive())
	}
	if v, _ := uq.Attr("affinity_strict"); v != "0" {
		t.Errorf("a failed write changed affinity_strict to %s", v)
	}
	if hidden.MaxActive() != wq.DefaultMaxActive {
		t.Error("a write reached a queue without wq.Sysfs")
	}
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rw_unbound/affinity_strict", "1"); r.code != http.StatusOK || r.body != "1\n" {
		t.Errorf("POST affinity_strict 1: %d %q", r.code, r.body)
	}
	if v, _ := uq.Attr("affinity_strict"); v != "1" {
		t.Errorf("affinity_strict = %s after POST 1", v)
	}

	// A global.
	old := wq.CPUIntensiveThresh()
	t.Cleanup(func() { _ = wq.SetCPUIntensiveThresh(old) })
	if r := do(t, srv, http.MethodPost, "/attrs/global/cpu_intensive_thresh_us", "20000"); r.code != http.StatusOK || r.body != "20000\n" {
		t.Errorf("POST cpu_intensive_thresh_us: %d %q", r.code, r.body)
	}
	if wq.CPUIntensiveThresh() != 20*time.Millisecond {
		t.Errorf("CPUIntensiveThresh = %v after POST 20000", wq.CPUIntensiveThresh())
	}

	// Limits and cross-origin protection. (The 413 makes the server close
	// the connection after a 500 ms lingering close: net/http's
	// rstAvoidanceDelay.)
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rw/max_active", strings.Repeat("1", 5000)); r.code != http.StatusRequestEntityTooLarge {
		t.Errorf("huge body: %d, want 413", r.code)
	}
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rw/max_active", "7", "Sec-Fetch-Site", "cross-site"); r.code != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", r.code)
	}
	if q.MaxActive() != 6 {
		t.Errorf("rejected writes changed max_active to %d", q.MaxActive())
	}
}

// TestAttrsWriteRT: the attributes an RT queue fixes answer 409.
func TestAttrsWriteRT(t *testing.T) {
	q, err := wq.Alloc("wh_rt", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO (needs root or CAP_SYS_NICE and an RT budget)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	for attr, v := range map[string]string{"nice": "5", "affinity_scope": "system", "affinity_strict": "0", "policy": "normal"} {
		if r := do(t, srv, http.MethodPost, "/attrs/wh_rt/"+attr, v); r.code != http.StatusConflict || !strings.Contains(r.body, "read-only") {
			t.Errorf("POST RT %s: %d %q, want 409", attr, r.code, r.body)
		}
	}
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rt/max_active", "3"); r.code != http.StatusOK || q.MaxActive() != 3 {
		t.Errorf("POST RT max_active: %d %q", r.code, r.body)
	}
}
