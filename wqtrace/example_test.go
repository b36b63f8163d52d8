package wqtrace_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/gowq/wq/wqtrace"
)

func ExampleFtraceWriter() {
	fw := wqtrace.NewFtraceWriter(os.Stdout)
	fw.Trace(&wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: 584_326_299_000, CPU: 0, TID: 8067, Comm: "dd",
		Work: 0xf2454434, Function: "blk_mq_run_work_fn", Workqueue: "kblockd", ReqCPU: wqtrace.WorkCPUUnbound, Flags: "d..1."})
	fw.Trace(&wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: 584_326_310_000, CPU: 0, TID: 58, Comm: "kworker/0:1H",
		Work: 0xf2454434, Function: "blk_mq_run_work_fn"})
	if err := fw.Close(); err != nil {
		fmt.Println(err)
	}
	// Output:
	//               dd-8067    [000] d..1.   584.326299: workqueue_queue_work: work struct=00000000f2454434 function=blk_mq_run_work_fn workqueue=kblockd req_cpu=256 cpu=0
	//     kworker/0:1H-58      [000] .....   584.326310: workqueue_execute_start: work struct 00000000f2454434: function blk_mq_run_work_fn
}

func ExampleParser() {
	text := `# tracer: nop
 kworker/u194:3- 86730 [095] 155865.157168: workqueue:workqueue_execute_start: work struct 0xffff95fb73276000: function ktask_thread
            bash 60728 [087] 155865.157116:                   probe:ktask_run: (ffffffffb7ee7a80)
`
	p := wqtrace.NewParser(strings.NewReader(text))
	for ev := range p.All() {
		fmt.Printf("%s tid=%d cpu=%d work=%#x %s\n", ev.Kind, ev.TID, ev.CPU, ev.Work, ev.Function)
	}
	st := p.Stats()
	fmt.Println(p.Err(), st.Events, st.Comments, st.Other)
	// Output:
	// workqueue_execute_start tid=86730 cpu=95 work=0xffff95fb73276000 ktask_thread
	// <nil> 1 1 1
}
