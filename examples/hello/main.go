// Command hello queues a few work items on each gowq worker class and
// prints where and how fast they ran. It is the smallest gowq program.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gowq/wq"
)

func main() {
	classes := []struct {
		name  string
		flags wq.Flags
	}{
		{"normal per-CPU", wq.PerCPU},
		{"highpri per-CPU", wq.PerCPU | wq.HighPri},
		{"RT per-CPU", wq.PerCPU | wq.RT},
		{"RT unbound (strict)", wq.Unbound | wq.RT},
	}
	for _, c := range classes {
		q, err := wq.Alloc("hello", c.flags, 0)
		if errors.Is(err, wq.ErrPermission) {
			fmt.Printf("%-20s skipped: %v\n", c.name, err)
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		var start time.Time
		var lat time.Duration
		w := wq.NewWork(func() { lat = time.Since(start) })
		for i := 0; i < 3; i++ {
			start = time.Now()
			q.Queue(w)
			w.Flush()
		}
		fmt.Printf("%-20s queue-to-start %v\n", c.name, lat)
		q.Destroy()
	}
}
