package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/adaptive"
)

// newAdaptiveCmd is `wqlab adaptive`: adaptive placement (escape_after)
// against per-CPU and unbound queues, under seed 004's hog and idle.
func newAdaptiveCmd(stdout, stderr io.Writer) *cobra.Command {
	var loads []string
	var samples int
	var gap time.Duration
	var asJSON bool
	var only []string
	cmd := &cobra.Command{
		Use:   "adaptive",
		Short: "Measure adaptive placement (escape_after) against per-CPU and unbound queues, under a hog and idle",
		Long: `adaptive measures queue-to-start latency (p50, p99, max, us) and locality
(share of items started on the queueing CPU) of per-CPU queues, unbound
queues and per-CPU queues with escape_after 20, 50 and 200 us, for the
normal and RT classes. Items are queued on cpu0 (the first online CPU) by a
thread pinned there, under two loads:
  hog   two nice -20 hogs pinned to that CPU (seed 004)
  none  idle machine
and checks the goals: under the hog, each adaptive row's p99 within 1.5x of
the unbound row of its class; idle, locality >= 95% and p50 within 1.1x of
the per-CPU row of its class.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := adaptive.Options{Samples: samples, Gap: gap}
			for _, l := range loads {
				if l = strings.TrimSpace(l); l != "" {
					o.Loads = append(o.Loads, adaptive.Load(l))
				}
			}
			for _, s := range only {
				if s = strings.TrimSpace(s); s != "" {
					o.Configs = append(o.Configs, s)
				}
			}
			if samples < 1 {
				return fmt.Errorf("--samples %d: want 1..%d", samples, adaptive.MaxSamples)
			}
			if gap < 0 {
				return fmt.Errorf("--gap %v: must not be negative", gap)
			}
			if err := o.Validate(); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "adaptive: measuring %d samples per row and load...\n", samples)
			return runExperiment(cmd.Context(), adaptive.Experiment(o), asJSON, "", stdout)
		},
	}
	cmd.Flags().StringSliceVar(&loads, "load", []string{"hog", "none"}, "loads, in order: hog (two nice -20 hogs on cpu0), none (idle)")
	cmd.Flags().IntVar(&samples, "samples", adaptive.DefaultSamples, "samples per row and load")
	cmd.Flags().StringSliceVar(&only, "configs", nil, "rows to measure, comma-separated names (default all): "+strings.Join(adaptive.Configs(), ", "))
	cmd.Flags().DurationVar(&gap, "gap", adaptive.DefaultGap, "pause between two samples")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	return cmd
}
