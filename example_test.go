package wq_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/gowq/wq"
)

// A request embeds its work item, as kernel structs embed work_struct.
type request struct {
	wq.Work
	block  int
	result string
}

func newRequest(block int) *request {
	r := &request{block: block}
	r.Init(func() { r.result = fmt.Sprintf("block %d verified", r.block) })
	return r
}

func ExampleAlloc() {
	q, err := wq.Alloc("verity", wq.PerCPU|wq.RT, 0, wq.AllowRTFallback())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()

	r := newRequest(7)
	fmt.Println("queued:", q.Queue(&r.Work))
	r.Flush() // wait for it, as flush_work does
	fmt.Println(r.result)
	// Output:
	// queued: true
	// block 7 verified
}

func ExampleWorkqueue_ModDelayed() {
	q, err := wq.Alloc("timeouts", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()

	fired := 0
	dw := wq.NewDelayedWork(func() { fired++ })
	fmt.Println("was pending:", q.ModDelayed(dw, time.Hour)) // idle: queued now
	fmt.Println("was pending:", q.ModDelayed(dw, time.Hour)) // pending: timer modified
	dw.Flush()                                               // runs it now and waits
	fmt.Println("fired:", fired)
	// Output:
	// was pending: false
	// was pending: true
	// fired: 1
}

func ExampleWork_CancelSync() {
	q, err := wq.Alloc("cancel", wq.PerCPU, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()

	w := wq.NewWork(func() {})
	q.Queue(w)
	w.CancelSync() // pending or running: afterwards it is neither
	fmt.Println("busy after CancelSync:", w.Busy())
	// Output:
	// busy after CancelSync: 0
}

func ExampleAlloc_permission() {
	_, err := wq.Alloc("rt", wq.PerCPU|wq.RT, 0)
	if errors.Is(err, wq.ErrPermission) {
		fmt.Println("no CAP_SYS_NICE: use AllowRTFallback or grant the privilege")
		return
	}
	fmt.Println("RT class available")
}
