package wqhttp_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

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
