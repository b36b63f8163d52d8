package antagonist_test

import (
	"fmt"
	"log"

	"github.com/gowq/wq/lab/antagonist"
)

// The seed 000 load: 8 fio-style burners at 90%, measured while the
// experiment runs. main must call antagonist.MaybeRunChild first.
func ExampleBurners() {
	meter, err := antagonist.StartLoadMeter()
	if err != nil {
		log.Fatal(err)
	}
	g, err := antagonist.Burners(antagonist.BurnerSpec{}) // 8 jobs, 90%, qsort
	if err != nil {
		log.Fatal(err)
	}
	// ... run the latency experiment here ...
	load, _ := meter.Read()
	usage := g.Usage()
	if err := g.Stop(); err != nil {
		log.Print(err)
	}
	fmt.Println(g.Name(), usage, load)
}

// The seed 004 load: `stress --cpu 2` pinned to CPU 0 at nice -20.
func ExampleHog() {
	g, err := antagonist.Hog(antagonist.HogSpec{CPU: 0, Procs: 2, Nice: -20})
	if err != nil {
		log.Fatal(err) // ErrPermission without CAP_SYS_NICE
	}
	defer g.Stop()
	// ... run the experiment ...
}
