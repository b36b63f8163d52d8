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
	polled := map[string]bool{}
	for _, m := range regexp.MustCompile(`getJSON\("([a-z]+)"\)`).FindAllStringSubmatch(r.body, -1) {
		polled[m[1]] = true
	}
	if len(polled) != 3 {
		t.Fatalf("script polls %v, want 3 endpoints (monitor, hist, dump)", polled)
	}
	for ep := range polled {
		jr := get(t, srv, "/"+ep+"?format=json")
		mustOK(t, jr, ep)
		if jr.ctype != "application/json" {
			t.Errorf("%s: Content-Type %q", ep, jr.ctype)
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

// TestUIColumnsExplained catches a column of the live page, or of the
// wq_monitor.py text table, that nothing explains: every header of the
// page's three tables has a tooltip and a legend entry, and every column of
// the text table has a legend line (wqmon prints them).
func TestUIColumnsExplained(t *testing.T) {
	srv := server(t, wqhttp.Options{})
	page := get(t, srv, "/ui").body
	if regexp.MustCompile(`<!--[a-z-]+-->`).MatchString(page) {
		t.Errorf("page keeps a placeholder: %s", regexp.MustCompile(`<!--[a-z-]+-->`).FindString(page))
	}
	heads := regexp.MustCompile(`<th( title="([^"]*)")?>([^<]*)</th>`).FindAllStringSubmatch(page, -1)
	if len(heads) < len(wqhttp.MonitorColumns)+len(wqhttp.PoolColumns) {
		t.Fatalf("page has %d header cells, want at least %d", len(heads), len(wqhttp.MonitorColumns)+len(wqhttp.PoolColumns))
	}
	for _, h := range heads {
		if strings.TrimSpace(h[2]) == "" {
			t.Errorf("header %q has no tooltip", h[3])
		}
		if !strings.Contains(page, "<dt>Workqueues: "+h[3]+"</dt>") && !strings.Contains(page, "<dt>Worker pools: "+h[3]+"</dt>") &&
			!strings.Contains(page, "<dt>Affinity scopes: "+h[3]+"</dt>") {
			t.Errorf("header %q has no legend entry", h[3])
		}
	}
	for _, name := range []string{"CPUitsv", "CMW/RPR", "mayday", "rescued", "ESC", "items/s", "idle", "pending"} {
		if !strings.Contains(page, ">"+name+"</th>") {
			t.Errorf("page lacks the column %q", name)
		}
	}
	var legend strings.Builder
	if err := wqhttp.WriteMonitorLegend(&legend); err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	if err := wqhttp.WriteMonitorTable(&table, nil); err != nil {
		t.Fatal(err)
	}
	for _, col := range strings.Fields(table.String()) {
		if !strings.Contains(legend.String(), "\n"+col+": ") && !strings.HasPrefix(legend.String(), col+": ") {
			t.Errorf("text table column %q has no legend line:\n%s", col, legend.String())
		}
	}
}
