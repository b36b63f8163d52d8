package wqhttp_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/wqhttp"
	"golang.org/x/sys/unix"
)

const httpChildEnv = "GOWQ_WQHTTP_NICE_CHILD"

// TestAttrsWriteValidated: writes through HTTP are validated like the
// typed setters. It runs in a child, unprivileged and started with nice
// -n 19: a nice, class or RT setting that no thread of the process can
// get answers 403 with the error text, and the attribute keeps its value;
// a value it can get answers 200.
func TestAttrsWriteValidated(t *testing.T) {
	if os.Getenv(httpChildEnv) == "" {
		args := []string{"-test.run=^TestAttrsWriteValidated$", "-test.v"}
		var cmd *exec.Cmd
		switch {
		case os.Geteuid() == 0:
			cmd, _ = testutil.NobodyCommand(t, args, httpChildEnv+"=1")
		case sched.HasCapSysNice():
			t.Skip("needs an unprivileged child: run as root (child as nobody) or as a user without CAP_SYS_NICE")
		default:
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd = exec.Command(self, args...)
			cmd.Env = append(os.Environ(), httpChildEnv+"=1")
		}
		nice, err := exec.LookPath("nice")
		if err != nil {
			t.Skip("no nice command")
		}
		cmd.Args = append([]string{"nice", "-n", "19", cmd.Path}, cmd.Args[1:]...)
		cmd.Path = nice
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS") && !strings.Contains(string(out), "--- SKIP") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "--- SKIP") {
			t.Skipf("child skipped:\n%s", out)
		}
		return
	}
	if a, _ := sched.GetAttr(0); a.Nice != 19 {
		t.Fatalf("child at nice %d, want 19", a.Nice)
	}
	var rl unix.Rlimit
	if sched.HasCapSysNice() || unix.Getrlimit(unix.RLIMIT_NICE, &rl) == nil && rl.Cur > 1 {
		t.Skip("the child may lower its nice")
	}
	alloc(t, "wv_unbound", wq.Unbound|wq.Sysfs)
	alloc(t, "wv_percpu", wq.PerCPU|wq.Sysfs)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	for _, c := range []struct {
		path, value string
		code        int
		text        []string
	}{
		{"/attrs/wv_unbound/nice", "14", http.StatusForbidden, []string{"not permitted", "nice 14", "CAP_SYS_NICE"}},
		{"/attrs/wv_unbound/nice", "18", http.StatusForbidden, []string{"not permitted"}},
		{"/attrs/wv_unbound/nice", "-5", http.StatusForbidden, []string{"not permitted"}},
		{"/attrs/wv_unbound/policy", "highpri", http.StatusForbidden, []string{"not permitted"}},
		{"/attrs/wv_percpu/policy", "fifo", http.StatusForbidden, []string{"not permitted"}},
		{"/attrs/global/highpri_policy", "fifo", http.StatusForbidden, []string{"not permitted", "SCHED_FIFO"}},
		{"/attrs/global/rt_priority", "5", http.StatusForbidden, []string{"not permitted"}},
		{"/attrs/global/rt_priority", "0", http.StatusBadRequest, []string{"invalid argument"}},
	} {
		before := get(t, srv, c.path).body
		r := do(t, srv, http.MethodPost, c.path, c.value)
		if r.code != c.code {
			t.Errorf("POST %s %q: %d %q, want %d", c.path, c.value, r.code, r.body, c.code)
		}
		for _, s := range c.text {
			if !strings.Contains(r.body, s) {
				t.Errorf("POST %s %q: body %q does not say %q", c.path, c.value, r.body, s)
			}
		}
		if after := get(t, srv, c.path).body; after != before {
			t.Errorf("refused POST %s %q changed it from %q to %q", c.path, c.value, before, after)
		}
	}
	if r := do(t, srv, http.MethodPost, "/attrs/wv_unbound/nice", "19"); r.code != http.StatusOK || r.body != "19\n" {
		t.Errorf("POST nice 19 at nice 19: %d %q", r.code, r.body)
	}
}

// TestAttrsWriteSameNameAllOrNothing: a write to queues that share a name
// is refused as a whole when one of them refuses it; the ones already
// written get their old value back. (Which queue is written first varies,
// so the write is tried several times.)
func TestAttrsWriteSameNameAllOrNothing(t *testing.T) {
	uq := alloc(t, "wv_twins", wq.Unbound|wq.Sysfs)
	oq, err := wq.AllocOrdered("wv_twins", wq.Sysfs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oq.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	for i := range 20 {
		for _, c := range []struct{ attr, value string }{
			{"max_active", fmt.Sprint(2 + i)}, // the ordered queue keeps 1
			{"affinity_scope", "cpu"},         // read-only on the ordered queue
		} {
			oldU, _ := uq.Attr(c.attr)
			oldO, _ := oq.Attr(c.attr)
			r := do(t, srv, http.MethodPost, "/attrs/wv_twins/"+c.attr, c.value)
			if r.code < 400 || r.code >= 500 {
				t.Errorf("POST %s %s to twins: %d %q, want a 4xx", c.attr, c.value, r.code, r.body)
			}
			if v, _ := uq.Attr(c.attr); v != oldU {
				t.Fatalf("refused POST %s %s changed the unbound twin from %q to %q", c.attr, c.value, oldU, v)
			}
			if v, _ := oq.Attr(c.attr); v != oldO {
				t.Fatalf("refused POST %s %s changed the ordered twin from %q to %q", c.attr, c.value, oldO, v)
			}
		}
	}
}

// attrSnapshot reads every attribute of qs and every global attribute.
func attrSnapshot(t *testing.T, qs ...*wq.Workqueue) map[string]string {
	out := map[string]string{}
	for _, n := range wq.GlobalAttrNames() {
		v, err := wq.GlobalAttr(n)
		if err != nil {
			t.Fatalf("GlobalAttr(%q): %v", n, err)
		}
		out["global/"+n] = v
	}
	for _, q := range qs {
		for _, n := range q.AttrNames() {
			v, err := q.Attr(n)
			if err != nil {
				t.Fatalf("%s: Attr(%q): %v", q.Name(), n, err)
			}
			out[q.Name()+"/"+n] = v
		}
	}
	return out
}

// FuzzAttrsWrite posts arbitrary values to arbitrary /attrs paths.
// Properties: no panic; never a 500 (every refusal is a clear 4xx or a
// 503 at a thread limit); a refused write changes no attribute; an
// accepted one answers the value now in force, which the attribute reads
// back. Globals are restored after each input.
func FuzzAttrsWrite(f *testing.F) {
	values := []string{"1", "0", "-20", "19", "2048", "2049", "abc", "ff", "1-3", "cache", "system", "default",
		"highpri", "fifo", "normal", "Y", "N", "50us", "-1ms", " 1 \n", "\xff", strings.Repeat("9", 80)}
	queues := []string{"fz_percpu", "fz_unbound", "global", "nosuch", "fz_unbound/x", ""}
	attrs := append([]string{"per_cpu", "max_active", "policy", "nice", "cpumask", "affinity_scope",
		"affinity_strict", "escape_after", "", "x"}, wq.GlobalAttrNames()...)
	n := 0
	for _, q := range queues {
		for _, a := range attrs {
			n++
			f.Add(q, a, values[n%len(values)])
		}
	}
	pq, err := wq.Alloc("fz_percpu", wq.PerCPU|wq.Sysfs, 0)
	if err != nil {
		f.Fatal(err)
	}
	uq, err := wq.Alloc("fz_unbound", wq.Unbound|wq.Sysfs, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { pq.Destroy(); uq.Destroy() })
	h := wqhttp.Handler(wqhttp.Options{AllowWrites: true})
	f.Fuzz(func(t *testing.T, queue, attr, value string) {
		before := attrSnapshot(t, pq, uq)
		defer func() {
			for range 2 {
				for _, n := range wq.GlobalAttrNames() {
					if cur, _ := wq.GlobalAttr(n); cur != before["global/"+n] {
						_ = wq.SetGlobalAttr(n, before["global/"+n])
					}
				}
			}
		}()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(value))
		req.URL.Path = "/attrs/" + queue + "/" + attr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code, body := rec.Code, rec.Body.String()
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("POST %q %q: %d %q", req.URL.Path, value, code, body)
		}
		after := attrSnapshot(t, pq, uq)
		if code != http.StatusOK {
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("refused POST %q %q (%d %q) changed %s: %q -> %q", req.URL.Path, value, code, body, k, v, after[k])
				}
			}
			return
		}
		key := queue + "/" + attr
		if got, ok := after[key]; !ok || body != got+"\n" {
			t.Fatalf("POST %q %q answered %q; %s reads %q", req.URL.Path, value, body, key, got)
		}
	})
}

// TestRefusedWriteRestoresEveryAttribute catches the rollback of a write
// refused by one of several Sysfs queues of one name restoring a default
// instead of what was there: POST policy=highpri to an unbound queue at
// nice 5 and an RT queue is refused (409), and the unbound queue, written
// first half the time, must keep nice 5 and every other attribute.
// Skipped where RT queues are refused.
func TestRefusedWriteRestoresEveryAttribute(t *testing.T) {
	rq, err := wq.Alloc("wh_rollback", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO (needs root or CAP_SYS_NICE and an RT budget)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rq.Destroy)
	uq := alloc(t, "wh_rollback", wq.Unbound|wq.Sysfs)
	if err := uq.SetNice(5); err != nil {
		t.Fatal(err)
	}
	if err := uq.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}
	if err := uq.SetMaxActive(9); err != nil {
		t.Fatal(err)
	}
	srv := server(t, wqhttp.Options{AllowWrites: true})
	uBefore, rBefore := uq.Attrs(), rq.Attrs()
	// The two queues are written in an order that varies between
	// requests: 32 requests write the unbound queue first at least once
	// except with probability 2^-32.
	for i := range 32 {
		for _, c := range []struct{ attr, value string }{{"policy", "highpri"}, {"policy", "fifo"}} {
			if r := do(t, srv, http.MethodPost, "/attrs/wh_rollback/"+c.attr, c.value); r.code != http.StatusConflict {
				t.Fatalf("request %d: POST %s=%s: %d %q, want 409", i, c.attr, c.value, r.code, r.body)
			}
			if got := uq.Attrs(); !reflect.DeepEqual(got, uBefore) {
				t.Fatalf("request %d: refused %s=%s changed the unbound queue from %+v to %+v", i, c.attr, c.value, uBefore, got)
			}
			if got := rq.Attrs(); !reflect.DeepEqual(got, rBefore) {
				t.Fatalf("request %d: refused %s=%s changed the RT queue from %+v to %+v", i, c.attr, c.value, rBefore, got)
			}
		}
	}
	// A write both accept still goes through.
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rollback/max_active", "4"); r.code != http.StatusOK {
		t.Fatalf("POST max_active=4: %d %q", r.code, r.body)
	}
	if uq.MaxActive() != 4 || rq.MaxActive() != 4 {
		t.Errorf("max_active %d and %d after POST 4", uq.MaxActive(), rq.MaxActive())
	}
}

// TestNumberWritesOutOfRangeAnswer400 catches attribute writes through
// wqhttp whose number overflows being accepted (200) as another value.
func TestNumberWritesOutOfRangeAnswer400(t *testing.T) {
	q := alloc(t, "wh_range", wq.PerCPU|wq.Sysfs)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	wdBefore, ciBefore := wq.WatchdogThresh(), wq.CPUIntensiveThresh()
	eaBefore := q.Attrs().EscapeAfter
	for _, c := range []struct{ path, value string }{
		{"/attrs/wh_range/escape_after", "18446744073709552"},
		{"/attrs/wh_range/escape_after", "9223372036854776"},
		{"/attrs/wh_range/max_active", "4294967297"},
		{"/attrs/global/watchdog_thresh", "18446744074"},
		{"/attrs/global/watchdog_thresh", "9223372037"},
		{"/attrs/global/cpu_intensive_thresh_us", "18446744073709552"},
		{"/attrs/global/rt_priority", "4294967297"},
	} {
		if r := do(t, srv, http.MethodPost, c.path, c.value); r.code != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %q, want 400", c.path, c.value, r.code, r.body)
		}
	}
	if wq.WatchdogThresh() != wdBefore || wq.CPUIntensiveThresh() != ciBefore || q.Attrs().EscapeAfter != eaBefore {
		t.Errorf("refused writes changed watchdog_thresh %v -> %v, cpu_intensive_thresh %v -> %v, escape_after %v -> %v",
			wdBefore, wq.WatchdogThresh(), ciBefore, wq.CPUIntensiveThresh(), eaBefore, q.Attrs().EscapeAfter)
		_ = wq.SetWatchdogThresh(wdBefore)
		_ = wq.SetCPUIntensiveThresh(ciBefore)
	}
}

// TestRefusedWriteRestoresClassAfterHighPriSwitch catches a rollback that
// re-resolves the saved policy instead of restoring the class that was in
// force: an unbound HighPri queue allocated while highpri_policy was fifo
// (SCHED_FIFO workers, nice 0) keeps that class after highpri_policy goes
// back to highpri, but a refused POST nice=5 (an RT queue of the same name
// refuses it) rolled the queue back through ApplyAttrs{HighPri, nice 0},
// which now means nice -20 and is refused as a read-only nice: the queue
// stayed at normal nice 5. Skipped where SCHED_FIFO is refused.
func TestRefusedWriteRestoresClassAfterHighPriSwitch(t *testing.T) {
	if err := wq.SetHighPriPolicy(wq.PolicyFIFO); err != nil {
		t.Skipf("skipping: the process may not use SCHED_FIFO: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := wq.SetHighPriPolicy(wq.PolicyHighPri); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(restore)
	hq := alloc(t, "wh_rollback_class", wq.Unbound|wq.HighPri|wq.Sysfs)
	restore()
	rq, err := wq.Alloc("wh_rollback_class", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rq.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	hBefore, rBefore := hq.Attrs(), rq.Attrs()
	// The queues are written in an order that varies between requests;
	// 32 requests write the HighPri queue first at least once except
	// with probability 2^-32.
	for i := range 32 {
		r := do(t, srv, http.MethodPost, "/attrs/wh_rollback_class/nice", "5")
		if r.code != http.StatusConflict {
			t.Fatalf("request %d: POST nice=5: %d %q, want 409", i, r.code, r.body)
		}
		if got := hq.Attrs(); !reflect.DeepEqual(got, hBefore) {
			t.Fatalf("request %d: refused nice=5 changed the HighPri queue from %+v to %+v (reply %q)", i, hBefore, got, r.body)
		}
		if got := rq.Attrs(); !reflect.DeepEqual(got, rBefore) {
			t.Fatalf("request %d: refused nice=5 changed the RT queue from %+v to %+v", i, rBefore, got)
		}
	}
}

// TestRefusedWriteKeepsConcurrentWrite catches a rollback that restores a
// snapshot taken before another writer's accepted write and so undoes it:
// POST affinity_scope=cpu to an unbound queue and an ordered queue of one
// name is refused by the ordered queue (read-only scope), while another
// goroutine sets the unbound queue's cpumask; that cpumask must survive.
func TestRefusedWriteKeepsConcurrentWrite(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	uq := alloc(t, "wh_rollback_race", wq.Unbound|wq.Sysfs)
	oq, err := wq.AllocOrdered("wh_rollback_race", wq.Sysfs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oq.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	masks := [][]int{{online[0]}, {online[1]}}
	for round := range 40 {
		// The last of ten writes sets mask.
		mask := masks[round%2]
		stop := make(chan struct{})
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := do(t, srv, http.MethodPost, "/attrs/wh_rollback_race/affinity_scope", "cpu")
				if r.code != http.StatusConflict {
					t.Errorf("POST affinity_scope=cpu: %d %q, want 409", r.code, r.body)
					return
				}
			}
		}()
		for k := range 10 {
			if err := uq.SetCPUMask(masks[(round+k+1)%2]); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		<-posted
		if got := uq.Attrs(); !slices.Equal(got.CPUs, mask) || got.Scope != wq.ScopeDefault {
			t.Fatalf("round %d: after SetCPUMask(%v) beside refused writes: cpumask %v scope %v, want %v default", round, mask, got.CPUs, got.Scope, mask)
		}
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
