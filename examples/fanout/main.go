// Command fanout is an HTTP handler that verifies 16 blocks in parallel on
// a gowq workqueue under a 50 ms deadline, the first error cancelling the
// others (wq.Group: errgroup's semantics on a workqueue). It serves with
// net/http/httptest, so it needs no network: go run ./examples/fanout
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/gowq/wq"
)

// verify stands for the work on one block: 1 ms, or an error for the
// block named by ?bad=N.
func verify(ctx context.Context, block, bad int) error {
	if block == bad {
		return fmt.Errorf("block %d: bad checksum", block)
	}
	select {
	case <-time.After(time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The fan-out: 16 blocks, 50 ms deadline, first error cancels.
func handler(q *wq.Workqueue) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		bad, _ := strconv.Atoi(r.URL.Query().Get("bad"))
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		defer cancel()
		g, ctx := q.NewGroup(ctx)
		for b := 1; b <= 16; b++ {
			g.Go(func(ctx context.Context) error { return verify(ctx, b, bad) })
		}
		if err := g.Wait(); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		fmt.Fprintln(w, "16 blocks verified")
	}
}

func main() {
	// The default queue (normal class, every CPU, goroutine workers):
	// the class that measured best for this kind of work
	// (BenchmarkFanoutClasses; docs/go-users.md, "Which queue for which
	// work").
	q, err := wq.Alloc("verity", wq.Unbound, 0)
	if err != nil {
		log.Fatal(err)
	}
	defer q.Destroy()
	srv := httptest.NewServer(handler(q))
	defer srv.Close()
	for _, query := range []string{"", "?bad=7"} {
		resp, err := http.Get(srv.URL + query)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("GET /%s: %d %s", query, resp.StatusCode, body)
	}
}
