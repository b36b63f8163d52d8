package wq_test

import (
	"log"

	"github.com/gowq/wq"
)

// verify stands for the caller's work in the README's example.
func verify(block int64) { _ = block }

// Example_readmeUse is the README's "Use" code (README.md shows its body;
// TestReadmeGoBlocksCompile keeps the two equal). It has no output comment:
// it needs CAP_SYS_NICE and an RT budget to run, so go test only compiles it.
func Example_readmeUse() {
	q, err := wq.Alloc("verity", wq.PerCPU|wq.RT, 0) // SCHED_FIFO prio 1 workers, one pool per CPU
	if err != nil {
		log.Fatal(err) // errors.Is(err, wq.ErrPermission) without CAP_SYS_NICE
	}
	defer q.Destroy() // drains, then releases threads

	type request struct {
		wq.Work // embed, like struct work_struct
		block   int64
	}
	r := &request{block: 7}
	r.Init(func() { verify(r.block) })
	q.Queue(&r.Work) // false if already pending; never blocks, never allocates
	r.Flush()        // wait for it (flush_work)
}
