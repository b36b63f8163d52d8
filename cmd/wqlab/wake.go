package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/wake"
)

// newWakeCmd is `wqlab wake`: queue-to-start latency of every gowq class
// against the raw futex wake-up probe, under a chosen load.
func newWakeCmd(stdout, stderr io.Writer) *cobra.Command {
	var load string
	var samples int
	var gap time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "wake",
		Short: "Measure each worker class's wake-up latency against the raw futex probe, under load",
		Long: `wake measures queue-to-start latency (p50/p99/max, us) of the normal,
highpri and RT classes and of the raw wake-up probe (two C threads handing a
token through a futex, no Go scheduler in the path: the physical limit),
interleaved under the same load:
  --load hogs     one nice -20 CPU hog pinned to each CPU (default)
  --load burners  8 cpuio qsort burners at 90% (the seeds' fio job)
  --load none     idle machine
and checks the two targets: RT p99 within 2x of the probe's SCHED_FIFO p99,
and the normal class's p99 at least 10x RT's.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if samples < 1 || samples > 1_000_000 {
				return fmt.Errorf("--samples %d: want 1..1000000", samples)
			}
			if gap < 0 {
				return fmt.Errorf("--gap %v: must not be negative", gap)
			}
			switch wake.Load(load) {
			case wake.LoadHogs, wake.LoadBurners, wake.LoadNone:
			default:
				return fmt.Errorf("--load %q: want hogs, burners or none", load)
			}
			fmt.Fprintf(stderr, "wake: measuring %d samples of 7 configurations under load %q...\n", samples, load)
			res, err := wake.Run(cmd.Context(), wake.Options{Load: wake.Load(load), Samples: samples, Gap: gap})
			if err != nil {
				return &runFailure{err: err}
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			res.WriteTable(stdout)
			return nil
		},
	}
	cmd.Flags().StringVar(&load, "load", "hogs", "antagonist: hogs, burners or none")
	cmd.Flags().IntVar(&samples, "samples", 2000, "samples per configuration")
	cmd.Flags().DurationVar(&gap, "gap", 200*time.Microsecond, "pause between two samples")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	return cmd
}
