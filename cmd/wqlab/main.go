// Command wqlab answers, with numbers from this machine, which worker
// class latency-critical work should use, and what it buys over what Go
// programs use today.
//
// With no arguments it runs the default suite (about 2 minutes): four
// scenarios that reproduce the kernel mailing-list experiments behind
// gowq's worker classes (dm-verity reads, EROFS decompression, a 1 kHz
// submitter, delayed work under a pinned hog), each measuring every
// gowq class (normal, highpri, RT; per-CPU and unbound) and the usual Go
// executors (a go statement, a channel pool, ants, pond) under the same
// CPU load, interleaved in short slices, plus a throughput table with
// no antagonist (`wqlab --scenario throughput`). It prints one table per
// scenario with a verdict line, and writes wqlab-results/ with
// index.html (the report to open in a browser: every table, the
// verdicts, the machine facts and the tail plots in one self-contained
// page), results.json (schema: package github.com/gowq/wq/lab/scenario),
// results.txt and one plot per scenario (<name>-plot.svg).
//
//	wqlab                       # the default suite, ~2 min
//	wqlab --quick               # ~15 s smoke run (CI)
//	wqlab run --scenario submit,delayed --duration 10s
//	wqlab --configs rt,baselines --json > results.json
//	wqlab --list                # scenarios and configuration IDs
//	wqlab doctor                # what limits latency here, with remedies (--json)
//
// Rows that need privileges this process lacks (SCHED_FIFO for RT, nice
// -20 for highpri) are reported as skipped with the reason; the run goes
// on. Exit status: 0 on success, 1 when the run failed or was
// interrupted, 2 for a usage error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gowq/wq/lab/antagonist"
)

func main() {
	// Antagonist children are re-executions of this binary: they must
	// never get past this line.
	antagonist.MaybeRunChild()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
