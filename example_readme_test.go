package wq_test

import (
	"context"
	"log"

	"github.com/gowq/wq"
)

// verify stands for the caller's work in the README's example.
func verify(block int64) { _ = block }

// verifyBlock stands for the caller's work in the README's group example.
func verifyBlock(ctx context.Context, block int64) error { _ = block; return ctx.Err() }

// Example_readmeGo is the README's first "Use" block (README.md shows its
// body; TestReadmeGoBlocksCompile keeps the two equal). It runs, and has
// no output to check.
func Example_readmeGo() {
	q, err := wq.Alloc("verity", wq.Unbound, 0) // normal class; wq.RT for SCHED_FIFO workers
	if err != nil {
		log.Fatal(err) // errors.Is(err, wq.ErrPermission) for RT without CAP_SYS_NICE
	}
	defer q.Destroy() // runs what is queued, then releases the workers

	if err := q.Go(func() { verify(7) }); err != nil { // a closure; never blocks
		log.Print(err) // why not: errors.Is(err, wq.ErrDestroyed), wq.ErrQueueFull, ...
	}

	g, _ := q.NewGroup(context.Background()) // errgroup's semantics; the first error cancels its ctx
	for _, b := range []int64{1, 2, 3} {
		g.Go(func(ctx context.Context) error { return verifyBlock(ctx, b) })
	}
	if err := g.Wait(); err != nil { // the first error (it cancelled ctx); a panic is a *wq.PanicError
		log.Print(err)
	}
}

// Example_readmeUse is the README's "Use" code (README.md shows its body;
// TestReadmeGoBlocksCompile keeps the two equal). It has no output comment:
// it needs CAP_SYS_NICE and an RT budget to run, so go test only compiles it.
func Example_readmeUse() {
	q, err := wq.Alloc("verity", wq.PerCPU|wq.RT, 0) // SCHED_FIFO prio 1 workers, one pool per CPU
	if err != nil {
		log.Fatal(err) // errors.Is(err, wq.ErrPermission) without CAP_SYS_NICE
	}
	defer q.Destroy() // runs what is queued, then releases threads

	type request struct {
		wq.Work // embed, like struct work_struct
		block   int64
	}
	r := &request{block: 7}
	r.Init(func() { verify(r.block) })
	q.Queue(&r.Work) // false if already pending; never blocks, never allocates
	r.Flush()        // wait for it (flush_work)
}
