package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/lab/wake"
)

func TestWakeUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"wake", "--samples", "0"}, "--samples 0"},
		{[]string{"wake", "--samples", "1000001"}, "--samples 1000001"},
		{[]string{"wake", "--load", "fio"}, `--load "fio"`},
		{[]string{"wake", "--queuer", "rr"}, `--queuer "rr"`},
		{[]string{"wake", "--go-load", "-1"}, "--go-load -1"},
		{[]string{"wake", "--gap", "-1ms"}, "must not be negative"},
		{[]string{"wake", "--configs", "gowq RT per-CPU,bogus"}, `unknown config "bogus"`},
	}
	for _, tc := range cases {
		code, stdout, stderr := run(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d with %q", tc.args, code, stderr, stdout, exitUsage, tc.want)
		}
	}
}

func TestWakeOptions(t *testing.T) {
	o, err := wakeOptions("hogs", "fifo", 10000, 4, 100*time.Microsecond, []string{" ants/v2", "", "gowq RT per-CPU"})
	if err != nil {
		t.Fatal(err)
	}
	if o.Load != wake.LoadHogs || o.Queuer != wake.QueuerFIFO || o.Samples != 10000 || o.GoLoad != 4 ||
		o.Gap != 100*time.Microsecond || len(o.Configs) != 2 || o.Configs[0] != "ants/v2" {
		t.Errorf("options %+v", o)
	}
}

// TestWakeEndToEnd runs `wqlab wake` on an idle machine with a few rows,
// as a table and as JSON.
func TestWakeEndToEnd(t *testing.T) {
	code, stdout, stderr := run(t, "wake", "--load", "none", "--samples", "20", "--go-load", "1",
		"--configs", "raw probe SCHED_OTHER,gowq normal per-CPU,go statement,pond/v2")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"in-process load: 1 spinning goroutines", "| gowq normal per-CPU ", "| go statement ",
		"| pond/v2 ", " max |", "p50/probe"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "ants/v2") {
		t.Errorf("unselected row printed:\n%s", stdout)
	}
	code, stdout, stderr = run(t, "wake", "--load", "none", "--samples", "5", "--json", "--configs", "channel pool")
	if code != exitOK {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var res wake.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, stdout)
	}
	if len(res.Rows) != 1 || res.Rows[0].Config != "channel pool" || res.Rows[0].Summary.Count != 5 || res.Samples != 5 {
		t.Errorf("json result %+v", res)
	}
}
