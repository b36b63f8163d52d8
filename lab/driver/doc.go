// Package driver is what the lab's experiments share.
//
// The contract: every wqlab experiment (the scenario suite and the
// blocking bursts of package lab/scenario, `wqlab wake` in lab/wake,
// `wqlab adaptive` in lab/adaptive, `wqlab roundtrip` and `wqlab twq` in
// lab/twq) is an Experiment: a name, the rows
// it can measure (Configs), Validate, and Run(ctx) returning a Result
// that prints its tables (WriteTable) and writes one JSON document
// (WriteJSON) whose "schema" field is Schema(name). cmd/wqlab runs them
// all the same way. Func builds an Experiment from an options struct and
// a Run function; option errors wrap ErrInvalidOption (each package's
// own ErrInvalidOption is InvalidOption(pkg)); Counted, CheckConfigs and
// Wants are the count-based options and row selection the experiments
// share.
//
// The mechanism: how rows are interleaved (Interleave), how CPU loads
// are started, kept across measurements and measured (Loads, GoLoad,
// GCLoad), the queuing thread (Thread), and how tables are printed
// (WriteBox, WriteLoad, ShortReason), so that a row of one experiment is
// measured the way a row of another is.
package driver
