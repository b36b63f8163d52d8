package adaptive

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, o := range []Options{
		{Samples: -1}, {Slice: -1}, {Gap: -1}, {Loads: []Load{"burners"}}, {Configs: []string{"nope"}},
	} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidOption", o, err)
		}
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
}

// A short idle run of two rows: every sample is counted, locality of the
// plain per-CPU row is 100% (its worker is pinned to the queueing CPU),
// and the table names the goal lines.
func TestRunIdleShort(t *testing.T) {
	res, err := Run(context.Background(), Options{Loads: []Load{LoadNone}, Samples: 20,
		Configs: []string{"normal per-CPU", "normal per-CPU esc 200us"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tables) != 1 || len(res.Tables[0].Rows) != 2 {
		t.Fatalf("tables %+v", res.Tables)
	}
	for _, r := range res.Tables[0].Rows {
		if r.Skipped != "" || r.Measured != 20 {
			t.Errorf("row %s: measured %d, skipped %q", r.Config, r.Measured, r.Skipped)
		}
	}
	if l := res.Tables[0].Rows[0].Local; l != 1 {
		t.Errorf("plain per-CPU locality %.2f, want 1", l)
	}
	var b strings.Builder
	res.WriteTable(&b)
	if !strings.Contains(b.String(), "goal (idle): normal per-CPU esc 200us locality") {
		t.Errorf("table lacks the idle goal line:\n%s", b.String())
	}
}

// The table says once what "the escaper" is. Catches: jargon the output
// never expands.
func TestTableExplainsEscaper(t *testing.T) {
	var b strings.Builder
	if err := (&Result{}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(the escaper: ") {
		t.Errorf("output does not expand \"the escaper\":\n%s", b.String())
	}
}
