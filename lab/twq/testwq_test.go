package twq

import (
	"strings"
	"testing"
)

// The module-format lines say once what p50/p90/p95 measure and in what
// unit. Catches: percentiles printed with no word on what they time.
func TestTestWorkqueueOutputExplainsPercentiles(t *testing.T) {
	r := &TWQResult{Rows: []TWQRow{{Waiter: WaiterPinned, Label: "cache_shard", Threads: 2, Items: 10, PerSec: 1e5, P50: 900, P90: 1500, P95: 2000}}}
	var b strings.Builder
	if err := r.Write(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "p50/p90/p95: percentiles of the Queue call's own time") || !strings.Contains(out, "in ns") {
		t.Errorf("output does not say what p50/p90/p95 are:\n%s", out)
	}
}
