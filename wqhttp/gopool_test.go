package wqhttp_test

import (
	"strings"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

// wq_dump shows a goroutine-backed pool's workers as goroutines: tid=
// goroutine in the text, "goroutines": true and tid 0 in JSON. Catches a
// dump that prints tid 0 as if it were a thread.
func TestDumpGoroutineWorkers(t *testing.T) {
	q := alloc(t, "wh_gopool", wq.Unbound)
	if !q.GoroutineBacked() {
		t.Skip("default queues are on threads in this run (GOWQ_THREADS)")
	}
	run(q, 1, func() {})
	srv := server(t, wqhttp.Options{})
	r := get(t, srv, "/dump")
	mustOK(t, r, "GET /dump")
	if !strings.Contains(r.body, "tid=goroutine") || !strings.Contains(r.body, "gworker/u") {
		t.Errorf("/dump does not show the goroutine workers:\n%s", r.body)
	}
	d := decode[wqhttp.DumpReport](t, get(t, srv, "/dump?format=json"))
	id := q.PoolIDs()[0]
	for _, p := range d.Pools {
		if p.ID != id {
			continue
		}
		if !p.Goroutines || len(p.Workers) == 0 {
			t.Fatalf("pool %d: goroutines %v, %d workers", id, p.Goroutines, len(p.Workers))
		}
		for _, w := range p.Workers {
			if w.TID != 0 {
				t.Errorf("goroutine worker %s with tid %d", w.Name, w.TID)
			}
		}
		return
	}
	t.Fatalf("pool %d not in the JSON dump", id)
}
