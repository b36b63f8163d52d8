package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gowq/wq"
)

// TestDemoHasRTQueue catches a demo without the class gowq exists for: it
// has an RT queue, that runs SCHED_FIFO where the process may, and where
// it may not, runs at a lower class and says why (on stderr and in the
// monitor's fallback_reason, which the live page shows).
func TestDemoHasRTQueue(t *testing.T) {
	mayRT := true
	if q, err := wq.Alloc("wqmon_rt_probe", wq.PerCPU|wq.RT, 0); err == nil {
		q.Destroy()
	} else if errors.Is(err, wq.ErrPermission) {
		mayRT = false
	} else {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, context.Background(), "-demo", "-j", "-i", "0.2", "-n", "2", "^demo_rt$")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rows []jsonRow
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r jsonRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 || rows[1].Name != "demo_rt" {
		t.Fatalf("rows %+v, want demo_rt twice", rows)
	}
	r := rows[1]
	said := strings.Contains(errOut, "demo_rt runs at ")
	switch {
	case mayRT && (r.Policy != "fifo" || r.FallbackReason != "" || said):
		t.Errorf("RT permitted, but demo_rt runs at %q (fallback %q), stderr %q", r.Policy, r.FallbackReason, errOut)
	case !mayRT && (r.Policy == "fifo" || r.FallbackReason == "" || !said):
		t.Errorf("RT refused, but demo_rt runs at %q with fallback reason %q, stderr %q", r.Policy, r.FallbackReason, errOut)
	}
	t.Logf("may RT %v: demo_rt policy %s %s", mayRT, r.Policy, r.FallbackReason)
}

// TestLegendPrinted catches a table whose columns wqmon does not explain:
// the legend goes to stderr once, before the tables, and not with -j.
func TestLegendPrinted(t *testing.T) {
	code, out, errOut := runCmd(t, context.Background(), "-demo", "-i", "0.1", "-n", "2", "^demo_percpu$")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, col := range []string{"total", "infl", "CPUtime", "CPUitsv", "CMW/RPR", "mayday", "rescued", "ESC"} {
		if n := strings.Count(errOut, "wqmon:   "+col+": "); n != 1 {
			t.Errorf("stderr explains %q %d times, want once:\n%s", col, n, errOut)
		}
	}
	if strings.Contains(out, "CPUitsv: ") {
		t.Errorf("the legend went to stdout:\n%s", out)
	}
	_, _, errOut = runCmd(t, context.Background(), "-demo", "-j", "-i", "0", "^demo_percpu$")
	if strings.Contains(errOut, "CPUitsv: ") {
		t.Errorf("legend printed with -j:\n%s", errOut)
	}
}
