package wqhttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gowq/wq/wqhttp"
)

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
