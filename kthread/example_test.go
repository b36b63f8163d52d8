package kthread_test

import (
	"errors"
	"fmt"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

// A dedicated worker thread: queue, flush, destroy.
func ExampleCreateWorker() {
	wk, err := kthread.CreateWorker("example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer wk.Destroy()

	var msg string
	w := kthread.NewWork(func() { msg = "hello from " + wk.Name() })
	queued := wk.QueueWork(w)
	wk.FlushWork(w) // the item has run when FlushWork returns
	fmt.Println("queued:", queued)
	fmt.Println(msg)
	// Output:
	// queued: true
	// hello from example
}

// EROFS's per-CPU decompression workers: a SCHED_FIFO-low worker per online CPU, with an
// UNBOUND|HIGHPRI workqueue for CPUs that have none.
func ExampleNewPerCPU() {
	set, err := kthread.NewPerCPU("erofs_worker", wqfallback.Queue(nil), kthread.WithFIFOLow())
	if errors.Is(err, kthread.ErrPermission) {
		fmt.Println("no CAP_SYS_NICE:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer set.Destroy()

	// The item is embedded in the request, as struct kthread_work is in
	// struct z_erofs_decompressqueue: queueing it does not allocate.
	type request struct {
		work kthread.Work
		// ... pages to decompress
	}
	req := &request{}
	req.work.Init(func() { /* decompress req's pages */ })
	set.QueueLocal(&req.work) // this CPU's worker, or the fallback workqueue
	set.FlushWork(&req.work)
	_ = wq.OnlineCPUs() // the set follows these through wq.OnCPUChange
}
