package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/twq"
)

// newTWQCmd is `wqlab twq`: the kernel's lib/test_workqueue.c method on
// gowq, per affinity scope, with the raw futex ping-pong as the limit.
func newTWQCmd(stdout, stderr io.Writer) *cobra.Command {
	var o twq.TestWorkqueueOptions
	var scopes []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "twq",
		Short: "Run the kernel's test_workqueue benchmark: pinned threads queue one item each and wait for it, per affinity scope",
		Long: `twq runs the method of the kernel's lib/test_workqueue.c on gowq: one thread
per online CPU (--threads), each pinned to its CPU, queues one item at a
time on a shared unbound queue, times the Queue call, and waits for the item
to run before queueing the next (--items per thread), for each affinity
scope (cpu, smt, cache_shard, cache, numa, system). It prints the module's
lines, "test_workqueue: <scope> <n> items/sec p50=<ns> p90=<ns> p95=<ns> ns",
for two waiters:
  pinned     an OS thread pinned to its CPU waiting in futex_wait (the
             kernel's kthread_bind and wait_for_completion)
  goroutine  a plain goroutine waiting on a channel the item sends on
  pinned-chan  (with --waiter) a pinned OS thread waiting on a channel,
             woken through the Go scheduler
and the raw probe's futex ping-pong between two C threads (the partner on
the driver's CPU, and not pinned) as the limit, with the goal: the pinned
waiter on the default scope at least 1/3 of the raw ping-pong per thread.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range scopes {
				sc, err := labsys.ParseScope(s)
				if err != nil {
					return err
				}
				o.Scopes = append(o.Scopes, sc)
			}
			fmt.Fprintf(stderr, "twq: %d items per thread...\n", o.Items)
			return runExperiment(cmd.Context(), twq.TestWorkqueueExperiment(o), asJSON, "", stdout)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Threads, "threads", 0, "queuing threads, one per online CPU in order (0: every online CPU)")
	f.IntVar(&o.Items, "items", twq.DefaultItems, "items per thread")
	f.StringSliceVar(&o.Waiters, "waiter", nil, "waiter variants: pinned, goroutine, pinned-chan (default pinned,goroutine)")
	f.StringSliceVar(&scopes, "scopes", nil, "affinity scopes to run (default cpu,smt,cache_shard,cache,numa,system)")
	f.BoolVar(&o.NoProbe, "no-probe", false, "leave out the raw futex ping-pong rows")
	f.IntVar(&o.Rounds, "rounds", 1, "repeat the whole sequence, interleaved, and print each row's median items/s (1..100)")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
