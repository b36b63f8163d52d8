package twq

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gowq/wq"
)

// TestRunTestWorkqueuePrintsModuleLines: a small run prints the module's
// line for every scope of both waiters, the probe rows and the goal, with
// every item counted. Fault caught: a variant that loses a completion
// (the run would hang) or a row left out.
func TestRunTestWorkqueuePrintsModuleLines(t *testing.T) {
	res, err := RunTestWorkqueue(context.Background(), TestWorkqueueOptions{Items: 200, Rounds: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*len(Scopes) + 2; len(res.Rows) != want {
		t.Fatalf("%d rows, want %d", len(res.Rows), want)
	}
	for _, r := range res.Rows {
		if r.Skipped == "" && (r.PerSec <= 0 || r.Rounds != 2 || r.P50 <= 0 || r.P50 > r.P95) {
			t.Errorf("row %+v: want a rate over 2 rounds and ordered percentiles", r)
		}
	}
	var b strings.Builder
	if err := res.Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"test_workqueue: running", "test_workqueue: cache_shard ", " items/sec p50=", "raw-futex-pingpong-unpinned", "goal: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	res, err = RunTestWorkqueue(context.Background(), TestWorkqueueOptions{Items: 100, Waiters: []string{WaiterPinnedChan}, Scopes: []wq.Scope{wq.ScopeCacheShard}, NoProbe: true})
	if err != nil || len(res.Rows) != 1 || res.Rows[0].PerSec <= 0 {
		t.Fatalf("pinned-chan run: %v, %+v", err, res)
	}
}

// TestRunRoundTripRows: a small round-trip run measures every row that is
// not skipped, and the round trip is never shorter than queue->start.
// Fault caught: a waiter released before its item started.
func TestRunRoundTripRows(t *testing.T) {
	res, err := RunRoundTrip(context.Background(), RoundTripOptions{Samples: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(RoundTripConfigs()) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(RoundTripConfigs()))
	}
	for _, r := range res.Rows {
		if r.Skipped != "" {
			continue
		}
		if r.RoundTrip.Count != 50 || r.RoundTrip.Min < r.QueueStart.Min {
			t.Errorf("%s: %d samples, round trip min %.2f us < queue->start min %.2f us", r.Config, r.RoundTrip.Count, r.RoundTrip.Min, r.QueueStart.Min)
		}
	}
	var b strings.Builder
	if err := res.WriteTable(&b); err != nil || !strings.Contains(b.String(), "gowq normal unbound") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
}

// TestOptionsRefused: bad options are refused with ErrInvalidOption before
// anything runs. Fault caught: a zero or negative count taken as is.
func TestOptionsRefused(t *testing.T) {
	ctx := context.Background()
	for _, o := range []TestWorkqueueOptions{{Items: -1}, {Threads: -1}, {Rounds: 101}, {Waiters: []string{"x"}}, {Scopes: []wq.Scope{99}}} {
		if _, err := RunTestWorkqueue(ctx, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", o, err)
		}
	}
	for _, o := range []RoundTripOptions{{Samples: -1}, {Gap: -1}, {Configs: []string{"nope"}}} {
		if _, err := RunRoundTrip(ctx, o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v, want ErrInvalidOption", o, err)
		}
	}
}
