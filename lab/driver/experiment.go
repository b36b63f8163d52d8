package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq"
)

// Experiment is the one shape of a wqlab experiment: the scenario suite
// (package lab/scenario), `wqlab wake`, `wqlab adaptive` and the blocking
// bursts all implement it, so that the command line runs each the same
// way: validate the options, run, then print the table or write the JSON.
//
// An Experiment is a value holding its options; its methods do not change
// them. Run may be called once at a time.
type Experiment interface {
	// Name is the experiment's name: the wqlab subcommand (or scenario)
	// that runs it, and the prefix of its schema name.
	Name() string
	// Configs returns the names (or IDs) of the rows the experiment can
	// measure, in table order.
	Configs() []string
	// Validate checks the options without running anything, after
	// defaults. It returns an error wrapping ErrInvalidOption that names
	// the bad value, or nil.
	Validate() error
	// Run measures. It blocks for the run's length; rows that need a
	// privilege the process lacks are skipped with the reason, not
	// failed. It returns an error for invalid options (ErrInvalidOption),
	// a run that cannot start, or ctx's error when ctx ends (with a nil
	// Result, unless the experiment documents that it keeps partial
	// results).
	Run(ctx context.Context) (Result, error)
}

// Result is what an Experiment's Run returns.
type Result interface {
	// WriteTable prints the result as text tables, with the verdicts or
	// goals the experiment checks. It does not fail.
	WriteTable(w io.Writer)
	// WriteJSON writes the result as one indented JSON document whose
	// "schema" field names its layout (Schema). It returns w's error.
	WriteJSON(w io.Writer) error
}

// ErrInvalidOption is wrapped by every experiment's option errors; test
// with errors.Is. Each experiment package also has its own
// ErrInvalidOption, which wraps this one.
var ErrInvalidOption = errors.New("invalid option")

// InvalidOption returns the ErrInvalidOption of an experiment package:
// "<pkg>: invalid option", wrapping ErrInvalidOption.
func InvalidOption(pkg string) error { return fmt.Errorf("%s: %w", pkg, ErrInvalidOption) }

// Schema returns the schema name of an experiment's JSON document:
// "gowq.wqlab/v1" for the suite (name "" or "suite"), else
// "gowq.wqlab.<name>/v1". A new field may be added to a document without
// changing its schema name; removing one or changing its meaning changes
// the version.
func Schema(name string) string {
	if name == "" || name == "suite" {
		return "gowq.wqlab/v1"
	}
	return "gowq.wqlab." + name + "/v1"
}

// WriteJSON writes v as indented JSON (two spaces), one document ending
// in a newline, as every experiment's Result.WriteJSON does.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Counted is how a count-based experiment (`wqlab wake`, `wqlab
// adaptive`) samples each row: Samples per row in all, Gap between two
// samples of a row, and Slice samples per row per interleaving round
// (Interleave).
type Counted struct {
	Samples int
	Gap     time.Duration
	Slice   int
}

// Normalize returns c with its zero fields set from def, or an error
// wrapping errInvalid (an experiment's ErrInvalidOption) when Samples is
// outside 1..maxSamples, Slice is below 1 or Gap is negative.
func (c Counted) Normalize(def Counted, maxSamples int, errInvalid error) (Counted, error) {
	if c.Samples == 0 {
		c.Samples = def.Samples
	}
	if c.Gap == 0 {
		c.Gap = def.Gap
	}
	if c.Slice == 0 {
		c.Slice = def.Slice
	}
	switch {
	case c.Samples < 1 || c.Samples > maxSamples:
		return c, fmt.Errorf("%w: samples %d (want 1..%d)", errInvalid, c.Samples, maxSamples)
	case c.Slice < 1:
		return c, fmt.Errorf("%w: slice %d (want >= 1)", errInvalid, c.Slice)
	case c.Gap < 0:
		return c, fmt.Errorf("%w: negative gap %v", errInvalid, c.Gap)
	}
	return c, nil
}

// CheckConfigs returns an error wrapping errInvalid for the first name in
// selected that is not in known, nil when all are.
func CheckConfigs(selected, known []string, errInvalid error) error {
	for _, n := range selected {
		if !slices.Contains(known, n) {
			return fmt.Errorf("%w: unknown config %q (want one of: %s)", errInvalid, n, strings.Join(known, ", "))
		}
	}
	return nil
}

// Wants reports whether row name is selected: every row when selected is
// empty.
func Wants(selected []string, name string) bool {
	return len(selected) == 0 || slices.Contains(selected, name)
}

// ShortReason is a skip reason cut for a table cell: the text before its
// first colon when that comes within 60 bytes, else at most 60 bytes.
func ShortReason(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 && i < 60 {
		return s[:i]
	}
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

// WriteLoad appends to b what a load was: " (name)" when name says more
// than load, and " (CPUs busy: cpu0 N% ...)" from the per-CPU busy
// percentages, when there are.
func WriteLoad(b *strings.Builder, load, name string, pct []float64) {
	if name != "" && name != load {
		fmt.Fprintf(b, " (%s)", name)
	}
	if len(pct) > 0 {
		parts := make([]string, len(pct))
		for i, p := range pct {
			parts[i] = fmt.Sprintf("cpu%d %.0f%%", i, p)
		}
		fmt.Fprintf(b, " (CPUs busy: %s)", strings.Join(parts, " "))
	}
}

// Thread is a locked OS thread that runs functions one at a time: the
// queuing thread of a measurement, pinned and given a class by its setup.
type Thread struct {
	reqs chan func()
}

// StartThread starts a thread (wq.GoThread: its own, never the main
// thread, destroyed when stopped) and runs setup on it; when setup
// returns an error the thread ends and StartThread returns that error.
// It blocks until setup has returned.
func StartThread(setup func() error) (*Thread, error) {
	t := &Thread{reqs: make(chan func())}
	ready := make(chan error, 1)
	wq.GoThread(func() {
		if err := setup(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for fn := range t.reqs {
			fn()
		}
	})
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// Do runs fn on the thread and blocks until it has returned.
func (t *Thread) Do(fn func()) {
	done := make(chan struct{})
	t.reqs <- func() {
		defer close(done)
		fn()
	}
	<-done
}

// Stop ends the thread after the function it runs, if any. The Thread
// must not be used after.
func (t *Thread) Stop() { close(t.reqs) }
