// Package twq holds the lab's completion-path experiments: the
// round trip (RunRoundTrip: a plain goroutine queues one item and waits
// for the item's channel send) and the kernel's lib/test_workqueue.c
// method (RunTestWorkqueue: N threads each pinned to its own CPU queue one
// item at a time on a shared unbound queue and wait for its completion,
// for each affinity scope), with the raw probe's futex ping-pong between
// two C threads as the limit row.
package twq
