package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/lab/beside"
)

// newBesideCmd is `wqlab rt-beside`: the obvious program for RT
// post-processing beside CPU-bound background work, in three setups.
func newBesideCmd(stdout, stderr io.Writer) *cobra.Command {
	var o beside.Options
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rt-beside",
		Short: "Measure an RT queue's latency beside a busy default queue, a Threads() queue, and two ants pools",
		Long: `rt-beside runs the obvious program for latency-critical post-processing:
an RT queue (wq.Alloc("post", wq.Unbound|wq.RT, 4)) that gets a short item
every millisecond, beside CPU-bound background items always in flight, in
three setups alternated in one process:
  gowq RT beside a default queue    background on wq.Alloc("bg", wq.Unbound, 64)
  gowq RT beside a Threads() queue  the same with wq.Threads()
  two ants pools                    both on ants/v2 pools (4 and 64)
It prints queue->start of the post-processing items (p50, p99, max, us) and
the background's items/s per setup, and checks the goals: RT p99 beside the
default queue at most 2x its p99 beside the Threads() queue and at most 2x
the ants pools' p99; the background's items/s at least 0.8x ants'.
The RT setups need the privilege to use SCHED_FIFO (root or CAP_SYS_NICE,
or RLIMIT_RTPRIO); without it they are skipped. Takes about
3 x rounds x segment (9 s by default).`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Rounds < 0 || o.Rounds > 1000 || o.Segment < 0 || o.BG < 0 || o.BG > 1024 {
				return fmt.Errorf("rt-beside: --rounds 0..1000, --segment >= 0, --bg 0..1024")
			}
			fmt.Fprintf(stderr, "rt-beside: three setups alternated...\n")
			res, err := beside.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return res.WriteTable(stdout)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Rounds, "rounds", 6, "rounds of the three setups")
	f.DurationVar(&o.Segment, "segment", 0, "time per setup per round (default 500ms)")
	f.IntVar(&o.BG, "bg", 0, "background items in flight (default 4)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
