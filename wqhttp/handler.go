package wqhttp

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"

	"github.com/gowq/wq"
)

// Options configure Handler. The zero value serves every endpoint read-only
// at the root of the handler.
type Options struct {
	// AllowWrites enables POST and PUT under /attrs. When false (the
	// default) they answer 403 Forbidden and change nothing.
	AllowWrites bool
	// Prefix is the path the handler is mounted at, e.g. "/debug/wq"; it
	// is stripped from request paths before routing, requests outside it
	// get 404, and the prefix itself is redirected to prefix + "/". ""
	// when the handler is mounted at the root or behind http.StripPrefix.
	Prefix string
}

// Handler returns an http.Handler serving the endpoints listed in the
// package documentation. It registers nothing globally; mount it where the
// program wants it. The handler is safe for concurrent use; each request
// takes snapshots of the workqueue state and never waits for work items.
func Handler(opts Options) http.Handler {
	h := &handler{opts: opts, cop: http.NewCrossOriginProtection()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /ui", h.ui)
	mux.HandleFunc("GET /monitor", h.monitor)
	mux.HandleFunc("GET /dump", h.dump)
	mux.HandleFunc("GET /hist", h.hist)
	mux.HandleFunc("GET /attrs", h.attrsGet)
	mux.HandleFunc("GET /attrs/{path...}", h.attrsGet)
	write := h.cop.Handler(http.HandlerFunc(h.attrsWrite))
	mux.Handle("POST /attrs/{path...}", write)
	mux.Handle("PUT /attrs/{path...}", write)
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	if prefix == "" {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || rest != "" && rest[0] != '/' {
			http.NotFound(w, r)
			return
		}
		if rest == "" {
			// The index's links are relative: serve it under a slash.
			u := *r.URL
			u.Path += "/"
			http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = rest
		r2.URL.RawPath = ""
		mux.ServeHTTP(w, r2)
	})
}

type handler struct {
	opts Options
	cop  *http.CrossOriginProtection
}

// endpoints lists the index entries.
var endpoints = []struct{ path, what string }{
	{"monitor", "workqueue counters, the table of wq_monitor.py (total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC)"},
	{"dump", "affinity pods, worker pools and their workers, workqueue CPU -> pool (wq_dump.py)"},
	{"hist", "queue-to-start latency and execution time histograms per workqueue"},
	{"attrs", "runtime attributes of Sysfs workqueues and process-wide ones"},
}

func (h *handler) index(w http.ResponseWriter, r *http.Request) {
	if wantJSON(r) {
		type entry struct {
			Path string `json:"path"`
			What string `json:"what"`
		}
		var es []entry
		for _, e := range endpoints {
			es = append(es, entry{e.path, e.what})
		}
		writeJSON(w, es)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>gowq</title></head><body>\n<h1>gowq workqueues</h1>\n")
	b.WriteString("<p><a href=\"ui\">live page</a>: the monitor table, queue-to-start histograms and pools, refreshed every second</p>\n<ul>\n")
	for _, e := range endpoints {
		// Relative links, so the index works at any mount point.
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a> (<a href=\"%s?format=json\">json</a>): %s</li>\n", e.path, e.path, e.path, html.EscapeString(e.what))
	}
	writes := "disabled"
	if h.opts.AllowWrites {
		writes = "enabled: POST or PUT attrs/&lt;queue&gt;/&lt;attr&gt; or attrs/global/&lt;attr&gt; with the value as the body"
	}
	fmt.Fprintf(&b, "</ul>\n<p>%d workqueues, %d worker pools. Attribute writes %s.</p>\n</body></html>\n", len(wq.Queues(false)), len(wq.Pools()), writes)
	_, _ = w.Write([]byte(b.String()))
}

// wantJSON reports whether the request asks for JSON (?format=json).
func wantJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// checkFormat answers 400 for a format other than text or json.
func checkFormat(w http.ResponseWriter, r *http.Request) bool {
	switch f := r.URL.Query().Get("format"); f {
	case "", "text", "json":
		return true
	default:
		http.Error(w, fmt.Sprintf("wqhttp: unknown format %q (want text or json)", f), http.StatusBadRequest)
		return false
	}
}

// queueFilter returns the ?filter= regular expression (nil when absent),
// answering 400 when it does not compile.
func queueFilter(w http.ResponseWriter, r *http.Request) (re *regexp.Regexp, ok bool) {
	f := r.URL.Query().Get("filter")
	if f == "" {
		return nil, true
	}
	re, err := regexp.Compile(f)
	if err != nil {
		http.Error(w, "wqhttp: bad filter: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return re, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func textHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// queueType returns "ordered", "unbound" or "percpu", the TYPE column of
// the kernel's wq_dump.py (wq.Workqueue.Type).
func queueType(q *wq.Workqueue) string { return q.Type().String() }

// lastRunes returns the last n runes of s, as wq_monitor.py's name[-24:].
func lastRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[len(r)-n:])
}
