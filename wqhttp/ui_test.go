package wqhttp_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gowq/wq/wqhttp"
)

// TestUIPage checks the live page without a browser: it is served (also
// under a prefix), is HTML with the three sections the script fills, refers
// to nothing outside its own origin, and every endpoint its script polls
// answers JSON. The browser tests in cmd/wqmon check what it renders.
func TestUIPage(t *testing.T) {
	srv := server(t, wqhttp.Options{})
	r := get(t, srv, "/ui")
	mustOK(t, r, "GET /ui")
	if !strings.HasPrefix(r.ctype, "text/html") {
		t.Errorf("Content-Type %q", r.ctype)
	}
	for _, s := range []string{"<!DOCTYPE html>", `id="monitor"`, `id="hists"`, `id="pools"`, "<script>", "setTimeout(tick, INTERVAL_MS)"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	// No external asset: no src/href attribute, stylesheet link or
	// import, and no absolute URL anywhere but the comment-free script.
	for _, re := range []string{`(?i)\ssrc\s*=`, `(?i)\shref\s*=`, `(?i)<link`, `@import`, `url\(`, `https?://`} {
		if m := regexp.MustCompile(re).FindString(r.body); m != "" {
			t.Errorf("page refers outside itself: %q matches %s", m, re)
		}
	}
	// The endpoints the script polls, as it calls them.
	polled := regexp.MustCompile(`getJSON\("([a-z]+)"\)`).FindAllStringSubmatch(r.body, -1)
	if len(polled) != 3 {
		t.Fatalf("script polls %d endpoints, want 3 (monitor, hist, dump)", len(polled))
	}
	for _, m := range polled {
		jr := get(t, srv, "/"+m[1]+"?format=json")
		mustOK(t, jr, m[1])
		if jr.ctype != "application/json" {
			t.Errorf("%s: Content-Type %q", m[1], jr.ctype)
		}
	}
	if idx := get(t, srv, "/"); !strings.Contains(idx.body, `href="ui"`) {
		t.Errorf("index does not link the live page:\n%s", idx.body)
	}

	// Under a prefix, the page is at prefix/ui and its relative fetches
	// resolve to prefix/monitor etc.
	mux := http.NewServeMux()
	mux.Handle("/debug/wq/", wqhttp.Handler(wqhttp.Options{Prefix: "/debug/wq"}))
	ps := httptest.NewServer(mux)
	defer ps.Close()
	pr := get(t, ps, "/debug/wq/ui")
	mustOK(t, pr, "GET /debug/wq/ui")
	if pr.body != r.body {
		t.Error("the page differs under a prefix")
	}
}
