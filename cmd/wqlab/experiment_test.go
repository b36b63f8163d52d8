package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowq/wq/lab/driver"
)

type fakeResult struct{ Rows []string }

func (r *fakeResult) WriteTable(w io.Writer) error {
	_, err := io.WriteString(w, "table: "+strings.Join(r.Rows, ",")+"\n")
	return err
}
func (r *fakeResult) WriteJSON(w io.Writer) error {
	return driver.WriteJSON(w, struct {
		Schema string   `json:"schema"`
		Rows   []string `json:"rows"`
	}{driver.Schema("fake"), r.Rows})
}

func fakeExperiment(check, run error) driver.Experiment {
	return driver.Func[*fakeResult]{ID: "fake", Rows: []string{"a"}, Check: func() error { return check },
		Measure: func(context.Context) (*fakeResult, error) {
			if run != nil {
				return nil, run
			}
			return &fakeResult{Rows: []string{"a"}}, nil
		}}
}

// TestRunExperimentOutputs: every experiment the command line runs
// prints its table, or its JSON document with --json, and with an output
// directory also writes <name>.json and <name>.txt there; a Validate
// error is a usage error and a Run error a run failure (exit 2 and 1).
func TestRunExperimentOutputs(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out")
	var b bytes.Buffer
	if err := runExperiment(ctx, fakeExperiment(nil, nil), false, dir, &b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "table: a\n") || !strings.Contains(b.String(), "fake.json, fake.txt") {
		t.Errorf("table output %q", b.String())
	}
	js, err := os.ReadFile(filepath.Join(dir, "fake.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Schema string }
	if err := json.Unmarshal(js, &doc); err != nil || doc.Schema != "gowq.wqlab.fake/v1" {
		t.Errorf("fake.json %s: %v", js, err)
	}
	if txt, err := os.ReadFile(filepath.Join(dir, "fake.txt")); err != nil || string(txt) != "table: a\n" {
		t.Errorf("fake.txt %q: %v", txt, err)
	}

	b.Reset()
	if err := runExperiment(ctx, fakeExperiment(nil, nil), true, "", &b); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil || doc.Schema != "gowq.wqlab.fake/v1" {
		t.Errorf("--json output %q: %v", b.String(), err)
	}

	var rf *runFailure
	bad := errors.New("bad option")
	if err := runExperiment(ctx, fakeExperiment(bad, nil), false, "", io.Discard); err != bad || errors.As(err, &rf) {
		t.Errorf("Validate error: %v, want the usage error itself", err)
	}
	boom := errors.New("boom")
	if err := runExperiment(ctx, fakeExperiment(nil, boom), false, "", io.Discard); !errors.As(err, &rf) || !errors.Is(err, boom) {
		t.Errorf("Run error: %v, want a run failure", err)
	}
}
