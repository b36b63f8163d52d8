package wqhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/wqhttp"
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
