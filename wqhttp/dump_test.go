package wqhttp_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/wqhttp"
)

func TestDump(t *testing.T) {
	q := alloc(t, "wh_dump", wq.PerCPU)
	strict := alloc(t, "wh_dump_strict", wq.Unbound)
	if err := strict.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}
	run(strict, 1, func() {})
	release := make(chan struct{})
	busy := wq.NewWork(blockOn(release))
	q.QueueOn(0, busy)
	t.Cleanup(func() { close(release); q.Flush() })
	for busy.Busy()&wq.BusyRunning == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	srv := server(t, wqhttp.Options{})

	r := get(t, srv, "/dump")
	mustOK(t, r, "GET /dump")
	for _, s := range []string{"Affinity Scopes", "wq_unbound_cpumask=", "CPU\n  nr_pods", "SYSTEM\n  nr_pods  1",
		"Worker Pools", "Workqueue CPU -> pool", "idle/workers=", "cpu=  0", "wh_dump                  percpu",
		"wh_dump_strict           unbound,S", "blockOn", "running for"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("/dump lacks %q:\n%s", s, r.body)
		}
	}

	d := decode[wqhttp.DumpReport](t, get(t, srv, "/dump?format=json"))
	if len(d.AffinityPods["system"]) != 1 || len(d.AffinityPods["cpu"]) != len(wq.OnlineCPUs()) {
		t.Errorf("affinity pods %v, online %v", d.AffinityPods, wq.OnlineCPUs())
	}
	pools := map[int]wqhttp.DumpPool{}
	for _, p := range d.Pools {
		pools[p.ID] = p
		if p.Idle > p.NrWorkers || p.NrWorkers != len(p.Workers) || p.Policy == "" || p.CPUs == "" {
			t.Errorf("pool %+v inconsistent", p)
		}
	}
	var dq *wqhttp.DumpQueue
	for i := range d.Workqueues {
		if d.Workqueues[i].Name == "wh_dump" {
			dq = &d.Workqueues[i]
		}
	}
	if dq == nil {
		t.Fatal("wh_dump missing from /dump")
	}
	if dq.Type != "percpu" || len(dq.PoolIDs) < len(wq.OnlineCPUs()) {
		t.Fatalf("wh_dump %+v", dq)
	}
	p0, ok := pools[dq.PoolIDs[0]]
	if !ok {
		t.Fatalf("pool %d serving wh_dump on CPU 0 not listed", dq.PoolIDs[0])
	}
	// The class asks for nice 0; the workers run at 0, or at the
	// inherited nice when the process may not lower it (unprivileged
	// under nice -n 19): Nice is what they really run at.
	if p0.CPU != 0 || p0.Class != "normal" || p0.AskedNice != 0 || p0.Policy != "SCHED_OTHER" {
		t.Errorf("CPU 0 pool %+v", p0)
	}
	var running *wqhttp.DumpWorker
	for i, w := range p0.Workers {
		if !w.Idle && strings.Contains(w.Func, "blockOn") {
			running = &p0.Workers[i]
		}
	}
	if running == nil {
		t.Fatalf("no worker of pool %d running blockOn: %+v", p0.ID, p0.Workers)
	}
	if running.TID <= 0 || running.RunningNs <= 0 || !strings.HasPrefix(running.Name, "kworker/0:") {
		t.Errorf("running worker %+v", running)
	}
	if a, err := sched.GetAttr(running.TID); err != nil {
		t.Errorf("reading worker %d's nice: %v", running.TID, err)
	} else if a.Nice != p0.Nice {
		t.Errorf("pool %d says nice %d, its worker %d runs at %d", p0.ID, p0.Nice, running.TID, a.Nice)
	}
}

// TestDumpShowsCacheShard: /dump prints the cache_shard_size global and
// the CACHE_SHARD pods in wq_dump.py's layout, and its JSON carries both;
// /ui has the affinity-scope table that shows them. Fault caught: the new
// scope missing from the dump's scope order (its pods silently left out).
func TestDumpShowsCacheShard(t *testing.T) {
	srv := server(t, wqhttp.Options{})
	r := get(t, srv, "/dump")
	mustOK(t, r, "GET /dump")
	for _, s := range []string{"wq_cache_shard_size=" + strconv.Itoa(wq.CacheShardSize()), "CACHE_SHARD\n  nr_pods"} {
		if !strings.Contains(r.body, s) {
			t.Errorf("/dump lacks %q:\n%s", s, r.body)
		}
	}
	if i, j := strings.Index(r.body, "SMT\n"), strings.Index(r.body, "CACHE_SHARD\n"); i < 0 || j < i {
		t.Errorf("CACHE_SHARD not after SMT in /dump:\n%s", r.body)
	}
	d := decode[wqhttp.DumpReport](t, get(t, srv, "/dump?format=json"))
	if d.CacheShardSize != wq.CacheShardSize() || len(d.AffinityPods["cache_shard"]) == 0 {
		t.Errorf("JSON cache_shard_size %d, pods %v", d.CacheShardSize, d.AffinityPods["cache_shard"])
	}
	ui := get(t, srv, "/ui")
	mustOK(t, ui, "GET /ui")
	for _, s := range []string{`id="scopes"`, `"cache_shard"`, "cache_shard_size"} {
		if !strings.Contains(ui.body, s) {
			t.Errorf("/ui lacks %q", s)
		}
	}
}

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

func blockOn(ch chan struct{}) func() { return func() { <-ch } }
