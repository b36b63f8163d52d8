package wq_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// modelRuns counts model runs (rapid test cases, shrinking included).
var modelRuns int64

// TestModelLong is the model test's long mode, off unless
// GOWQ_MODEL_LONG is set to a number of operations, e.g.
//
//	GOWQ_MODEL_LONG=1000000 go test -run Model -timeout 30m -v .
//
// It runs rounds of rapid checks (500 per round on the plain variants, 100
// on the rescuer variants, unless -rapid.checks is given) until the model
// runs have executed at least that many operations, about 4% of them on
// the rescuer variants (slower: every item start waits for a mayday), and
// logs the operations executed and the violations (failed rounds). A
// failed round does not stop the next ones; three do. 10^6 operations took
// 3 min 21 s on 2 CPUs (shared with other test runs), 0 violations; the
// time is mostly waiting (mayday and 1 ms timers), not CPU.
func TestModelLong(t *testing.T) {
	s := os.Getenv("GOWQ_MODEL_LONG")
	if s == "" {
		t.Skip("set GOWQ_MODEL_LONG=<operations> to run the long mode")
	}
	target, err := strconv.ParseInt(s, 10, 64)
	if err != nil || target <= 0 {
		t.Fatalf("GOWQ_MODEL_LONG=%q: want a positive number of operations", s)
	}
	quietLogs(t)
	before := maps.Clone(modelStats)
	checks := flag.Lookup("rapid.checks")
	userChecks := checks != nil && checks.Value.String() != checks.DefValue
	if checks != nil {
		old := checks.Value.String()
		t.Cleanup(func() { _ = checks.Value.Set(old) })
	}
	start := time.Now()
	ops0, runs0 := modelOps.Load(), modelRuns
	var rescuerOps int64
	violations, rounds := 0, 0
	for done := int64(0); done < target; done = modelOps.Load() - ops0 {
		rescuer := rescuerOps*25 < done
		variants, maxOps, n := plainVariants, 100, "500"
		if rescuer {
			variants, maxOps, n = rescuerVariants, 30, "100"
		}
		if checks != nil && !userChecks {
			_ = checks.Value.Set(n)
		}
		kind := "plain"
		if rescuer {
			kind = "rescuer"
		}
		n0 := modelOps.Load()
		ok := t.Run(fmt.Sprintf("round%03d-%s", rounds, kind), rapid.MakeCheck(func(rt *rapid.T) {
			runModel(rt, rapid.SampledFrom(variants).Draw(rt, "variant"), maxOps)
		}))
		if rescuer {
			rescuerOps += modelOps.Load() - n0
		}
		rounds++
		if !ok {
			violations++
			if violations >= 3 {
				t.Logf("stopping after %d violations", violations)
				break
			}
		}
	}
	t.Logf("long mode: %d operations (%d on rescuer variants) in %d model runs, %d rounds, %d violations, %v",
		modelOps.Load()-ops0, rescuerOps, modelRuns-runs0, rounds, violations, time.Since(start).Round(time.Second))
	logModelStats(t, before)
}
