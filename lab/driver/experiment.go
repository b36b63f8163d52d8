package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	// goals the experiment checks. It returns w's error.
	WriteTable(w io.Writer) error
	// WriteJSON writes the result as one indented JSON document whose
	// "schema" field names its layout (Schema). It returns w's error.
	WriteJSON(w io.Writer) error
}

// Func is an Experiment made of its parts, for an experiment package
// whose options are a struct with a Validate method and whose entry point
// is a function Run(ctx, Options) (*Result, error).
type Func[R Result] struct {
	ID      string                           // Name
	Rows    []string                         // Configs
	Check   func() error                     // Validate
	Measure func(context.Context) (R, error) // Run
}

// Name returns f.ID.
func (f Func[R]) Name() string { return f.ID }

// Configs returns f.Rows.
func (f Func[R]) Configs() []string { return f.Rows }

// Validate calls f.Check.
func (f Func[R]) Validate() error { return f.Check() }

// Run calls f.Measure; an error gives a nil Result.
func (f Func[R]) Run(ctx context.Context) (Result, error) {
	res, err := f.Measure(ctx)
	if err != nil {
		return nil, err
	}
	return res, nil
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

// Doc is the head of an experiment's JSON document. Embedded first in its
// Result, it gives the document its "schema" field, which WriteResult
// sets.
type Doc struct {
	Schema string `json:"schema"` // Schema(name) of the experiment
}

func (d *Doc) doc() *Doc { return d }

// WriteResult writes r, an experiment's Result that embeds Doc, as one
// indented JSON document (WriteJSON) whose "schema" is Schema(name): the
// whole of an experiment's Result.WriteJSON. It returns w's error.
func WriteResult(w io.Writer, name string, r interface{ doc() *Doc }) error {
	r.doc().Schema = Schema(name)
	return WriteJSON(w, r)
}

// Measured returns the first of rows whose configuration is name and that
// was measured (not skipped, with samples): the reference row a verdict
// compares with. nil when there is none. key gives a row's configuration
// name, skip reason ("" when it ran) and sample count.
func Measured[R any](rows []R, name string, key func(*R) (config, skipped string, samples int64)) *R {
	for i := range rows {
		if c, s, n := key(&rows[i]); c == name && s == "" && n > 0 {
			return &rows[i]
		}
	}
	return nil
}
