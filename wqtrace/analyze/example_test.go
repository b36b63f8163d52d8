package analyze_test

import (
	"fmt"
	"os"

	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

func ExampleAnalyze() {
	f, err := os.Open("../../testdata/ktrace/idle-plus-fsync.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	events, err := wqtrace.Parse(f)
	if err != nil {
		fmt.Println(err)
		return
	}
	r := analyze.Analyze(events)
	kb := r.Workqueue("kblockd").QueueToStart
	fmt.Printf("kblockd: %d items, queue->start p50 %.0f us, p99 %.0f us, max %.0f us\n", kb.Count, kb.P50, kb.P99, kb.Max)
	_ = r.Workqueue("kblockd").Hist.WriteText(os.Stdout, "usecs")
	// Output:
	// kblockd: 398 items, queue->start p50 9 us, p99 41 us, max 74 us
	//      usecs               : count     distribution
	//          0 -> 1          : 0        |                                        |
	//          2 -> 3          : 45       |********                                |
	//          4 -> 7          : 107      |********************                    |
	//          8 -> 15         : 206      |****************************************|
	//         16 -> 31         : 26       |*****                                   |
	//         32 -> 63         : 12       |**                                      |
	//         64 -> 127        : 2        |                                        |
}
