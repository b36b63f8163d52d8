package driver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/gowq/wq/lab/adaptive"
	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/scenario"
	"github.com/gowq/wq/lab/twq"
	"github.com/gowq/wq/lab/wake"
)

type fakeResult struct{}

func (*fakeResult) WriteTable(io.Writer) error { return nil }
func (*fakeResult) WriteJSON(io.Writer) error  { return nil }

// TestEveryExperimentHasTheContract: the suite, the blocking bursts,
// wake, adaptive, roundtrip and twq are driver.Experiments with their
// names, their rows, and option errors that wrap driver.ErrInvalidOption
// (a package that kept an ErrInvalidOption of its own would fail
// errors.Is).
func TestEveryExperimentHasTheContract(t *testing.T) {
	for _, tc := range []struct {
		e       driver.Experiment
		name    string
		own     error // the package's ErrInvalidOption; nil: no invalid options
		hasRows string
	}{
		{wake.Experiment(wake.Options{Samples: -1}), wake.Name, wake.ErrInvalidOption, "gowq RT per-CPU"},
		{adaptive.Experiment(adaptive.Options{Samples: -1}), adaptive.Name, adaptive.ErrInvalidOption, "RT per-CPU esc 50us"},
		{scenario.Experiment(scenario.Options{Scenarios: []string{"nonesuch"}}), scenario.Suite, scenario.ErrInvalidOption, "rt-percpu"},
		{scenario.Experiment(scenario.Options{Scenarios: []string{scenario.Blocking}}), scenario.Blocking, nil, "go statement"},
		{twq.RoundTripExperiment(twq.RoundTripOptions{Samples: -1}), twq.RoundTripName, twq.ErrInvalidOption, "gowq RT per-CPU"},
		{twq.TestWorkqueueExperiment(twq.TestWorkqueueOptions{Items: -1}), twq.TestWorkqueueName, twq.ErrInvalidOption, "cache_shard"},
	} {
		if tc.e.Name() != tc.name {
			t.Errorf("Name %q, want %q", tc.e.Name(), tc.name)
		}
		if !slices.Contains(tc.e.Configs(), tc.hasRows) {
			t.Errorf("%s: Configs %v lack %q", tc.name, tc.e.Configs(), tc.hasRows)
		}
		err := tc.e.Validate()
		if tc.own == nil {
			if err != nil {
				t.Errorf("%s: Validate %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, tc.own) || !errors.Is(err, driver.ErrInvalidOption) {
			t.Errorf("%s: Validate %v, want %v wrapping driver.ErrInvalidOption", tc.name, err, tc.own)
		}
		if r, err := tc.e.Run(context.Background()); r != nil || !errors.Is(err, driver.ErrInvalidOption) {
			t.Errorf("%s: Run = %v, %v; want nil and the option error", tc.name, r, err)
		}
	}
}

// TestFuncRunErrorGivesNilResult: an error gives an untyped nil Result,
// not a nil *R inside a non-nil interface (which a caller's r != nil
// check would take for a result).
func TestFuncRunErrorGivesNilResult(t *testing.T) {
	boom := errors.New("boom")
	f := driver.Func[*fakeResult]{ID: "f", Check: func() error { return nil },
		Measure: func(context.Context) (*fakeResult, error) { return nil, boom }}
	if r, err := f.Run(context.Background()); r != nil || err != boom {
		t.Errorf("Run = %v, %v; want nil, boom", r, err)
	}
	f.Measure = func(context.Context) (*fakeResult, error) { return &fakeResult{}, nil }
	if r, err := f.Run(context.Background()); r == nil || err != nil {
		t.Errorf("Run = %v, %v; want a result", r, err)
	}
}

// TestWriteResult: an experiment's document starts with its schema, set
// from the experiment's name, and carries its own fields after it. Fault
// caught: a document without the schema, with another experiment's, or a
// Doc that hides the result's fields.
func TestWriteResult(t *testing.T) {
	type result struct {
		driver.Doc
		Rows int `json:"rows"`
	}
	var b bytes.Buffer
	r := &result{Rows: 3}
	if err := driver.WriteResult(&b, "demo", r); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"schema\": \"gowq.wqlab.demo/v1\",\n  \"rows\": 3\n}\n"
	if b.String() != want || r.Schema != driver.Schema("demo") {
		t.Errorf("WriteResult wrote %q (Schema %q), want %q", b.String(), r.Schema, want)
	}
}

// TestMeasured: the reference row is the first row of the name that ran
// and has samples. Fault caught: a skipped or empty row taken as the
// reference (a verdict against nothing), or a row of another name.
func TestMeasured(t *testing.T) {
	type row struct {
		config, skipped string
		n               int64
	}
	key := func(r *row) (string, string, int64) { return r.config, r.skipped, r.n }
	rows := []row{{"a", "no RT", 10}, {"a", "", 0}, {"b", "", 5}, {"a", "", 7}, {"a", "", 9}}
	if got := driver.Measured(rows, "a", key); got != &rows[3] {
		t.Errorf("Measured(a) = %+v, want the row with 7 samples", got)
	}
	if got := driver.Measured(rows, "c", key); got != nil {
		t.Errorf("Measured(c) = %+v, want nil", got)
	}
	if got := driver.Measured(rows[:2], "a", key); got != nil {
		t.Errorf("Measured of skipped and empty rows = %+v, want nil", got)
	}
}
