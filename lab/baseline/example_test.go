package baseline_test

import (
	"fmt"
	"log"
	"sync/atomic"

	"github.com/gowq/wq/lab/baseline"
)

// Run the same items on every baseline executor.
func Example() {
	for _, name := range baseline.Names() {
		e, err := baseline.New(name, 2)
		if err != nil {
			log.Fatal(err)
		}
		var n atomic.Int32
		for range 100 {
			if err := e.Submit(func() { n.Add(1) }); err != nil {
				log.Fatal(err)
			}
		}
		e.Close() // waits for all 100
		err = e.Submit(func() {})
		fmt.Println(e.Name(), n.Load(), err)
	}
	// Output:
	// go 100 baseline: executor closed
	// chan 100 baseline: executor closed
	// ants 100 baseline: executor closed
	// pond 100 baseline: executor closed
}
