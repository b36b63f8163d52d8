package wqhttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
	"go.uber.org/goleak"
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
