package wqhttp

import (
	_ "embed"
	"html"
	"net/http"
	"strings"
)

// uiTemplate is the live page served at /ui, compiled into the binary; its
// table headers and legend are filled in from MonitorColumns, UIColumns and
// PoolColumns (uiPage), so that the page and wqmon explain a column in the
// same words.
//
//go:embed ui/index.html
var uiTemplate string

// uiPage is the page as served.
var uiPage = []byte(buildUIPage(uiTemplate))

// uiMonitorColumns are the live page's monitor table columns, in order.
func uiMonitorColumns() []Column {
	return append(append([]Column{}, MonitorColumns...), UIColumns...)
}

// buildUIPage fills the page's header rows (each header with its meaning as
// a tooltip) and its legend.
func buildUIPage(page string) string {
	head := func(cols []Column) string {
		var b strings.Builder
		for _, c := range cols {
			b.WriteString(`<th title="` + html.EscapeString(c.Meaning) + `">` + html.EscapeString(c.Name) + `</th>`)
		}
		return b.String()
	}
	legend := func(title string, cols []Column) string {
		var b strings.Builder
		b.WriteString(`<dl class="legend" data-legend="` + html.EscapeString(title) + `">`)
		for _, c := range cols {
			b.WriteString("\n<dt>" + html.EscapeString(title+": "+c.Name) + "</dt><dd>" + html.EscapeString(c.Meaning) + "</dd>")
		}
		return b.String() + "\n</dl>"
	}
	return strings.NewReplacer(
		"<!--monitor-columns-->", head(uiMonitorColumns()),
		"<!--pool-columns-->", head(PoolColumns),
		"<!--scope-columns-->", head(ScopeColumns),
		"<!--legend-->", legend("Workqueues", uiMonitorColumns())+"\n"+legend("Affinity scopes", ScopeColumns)+"\n"+legend("Worker pools", PoolColumns),
	).Replace(page)
}

// uiCSP allows the page's own inline style and script and fetches from its
// own origin, nothing else: the page must work with no network.
const uiCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"

// ui serves the live page: the monitor table, each queue's queue-to-start
// histogram and the pools with their workers, refreshed every second by
// the page itself from /monitor, /hist and /dump (?format=json).
func (h *handler) ui(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", uiCSP)
	_, _ = w.Write(uiPage)
}
