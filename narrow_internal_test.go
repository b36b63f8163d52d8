package wq

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/sched"
)

// TestNarrowWake: an item queued to an idle non-RT unbound pool, from a
// thread pinned to a CPU, starts on that CPU: its worker was woken there
// (narrowWake), not on the idle CPU the kernel's wake balancing prefers.
// Without the hint, most of these items start on the other CPU. The
// worker's affinity is wide again by the time the item runs.
func TestNarrowWake(t *testing.T) {
	if _, ok := sched.CheapCPU(); !ok {
		t.Skip("no cheap CPU read on this machine: the queuer's CPU is unknown, no hint")
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(os.Getpid(), &set); err != nil || set.Count() < 2 {
		t.Skip("needs two allowed CPUs")
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	q, err := Alloc("narrow", Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	if err := q.SetNice(4); err != nil { // a pool of its own
		t.Fatal(err)
	}
	type obs struct {
		cpu  int
		wide bool
	}
	got := make(chan obs, 1)
	w := NewWork(func() {
		var s unix.CPUSet
		_ = unix.SchedGetaffinity(0, &s)
		c, _ := sched.CheapCPU()
		got <- obs{c, s.Count() >= 2}
	})
	done := make(chan [2]int)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := sched.SetAffinity(0, cpus[1:2]); err != nil {
			done <- [2]int{-1, -1}
			return
		}
		on, narrow := 0, 0
		for i := 0; i < 40; i++ {
			time.Sleep(2 * time.Millisecond) // sparse: the worker idles
			q.Queue(w)
			o := <-got
			if o.cpu == cpus[1] {
				on++
			}
			if !o.wide {
				narrow++
			}
			w.Flush()
		}
		done <- [2]int{on, narrow}
	}()
	r := <-done
	if r[0] < 0 {
		t.Skip("cannot pin the queuing thread")
	}
	if r[1] != 0 {
		t.Errorf("%d of 40 items ran with the worker's affinity still narrowed", r[1])
	}
	if r[0] < 30 {
		t.Errorf("%d of 40 sparse items started on the queuer's CPU %d, want most (the wake_cpu hint)", r[0], cpus[1])
	}
}
