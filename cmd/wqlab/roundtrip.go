package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/twq"
)

// newRoundTripCmd is `wqlab roundtrip`: queue->start, the waiter's wake-up
// and the whole round trip of one item whose plain-goroutine queuer waits
// on a channel the item sends on.
func newRoundTripCmd(stdout, stderr io.Writer) *cobra.Command {
	var o twq.RoundTripOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "roundtrip",
		Short: "Measure the round trip: a goroutine queues one item and waits for the item's channel send",
		Long: `roundtrip measures, per executor (go statement, ants/v2, gowq normal
unbound, normal per-CPU, RT per-CPU, RT unbound), a plain goroutine that
queues one item and waits on a channel; the item stamps its start and sends.
It prints queue->start, the wake-up of the waiting goroutine (from the send
to its return from the receive) and the round trip, p50 and p99 in us, and
the goals: round-trip p50 within 2 us of queue->start p50, round-trip p99 at
most 2x queue->start p99.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(stderr, "roundtrip: %d samples per row...\n", o.Samples)
			return runExperiment(cmd.Context(), twq.RoundTripExperiment(o), asJSON, "", stdout)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Samples, "samples", twq.DefaultRoundTripSamples, "samples per row")
	f.DurationVar(&o.Gap, "gap", twq.DefaultRoundTripGap, "pause between two samples of a row")
	f.StringSliceVar(&o.Configs, "only", nil, "rows to run, by name (default all)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
