package wqhttp

import (
	_ "embed"
	"net/http"
)

// uiPage is the live page served at /ui, compiled into the binary.
//
//go:embed ui/index.html
var uiPage []byte

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
