package wq_test

import (
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// TestCMReactsToBlocking: a per-CPU pool starts its next item while the
// running one blocks, without waiting for the CM monitor's slow tick. The
// slow tick is set to an hour, so a pool that learns of the blocking only
// at the tick (the old 1 ms cadence, scaled up) never starts the second
// item and the test times out; no wall-clock threshold is asserted. Each
// way of blocking is checked: a Go channel (Go-level parking of the
// locked goroutine), time.Sleep, and a read on a pipe (a system call).
// (CMW is not asserted: if A is preempted by the Go scheduler before B is
// queued, its thread sleeps, and B is started by Queue's kick instead.)
func TestCMReactsToBlocking(t *testing.T) {
	restore := wq.SetCMTick(time.Hour)
	defer restore()
	fast0, _ := wq.CMPolls()
	defer func() {
		if fast, _ := wq.CMPolls(); fast == fast0 && !t.Failed() {
			t.Errorf("the CM monitor took no fast sample while items blocked behind pending work")
		}
	}()
	kinds := []struct {
		name  string
		block func(release <-chan struct{})
	}{
		{"channel", func(release <-chan struct{}) { <-release }},
		{"sleep", func(release <-chan struct{}) {
			for {
				select {
				case <-release:
					return
				default:
					time.Sleep(50 * time.Millisecond)
				}
			}
		}},
		{"pipe", nil},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			q := mustAlloc(t, "cmfast-"+k.name, wq.PerCPU, 0)
			release := make(chan struct{})
			released := false
			defer func() { // before the cleanup's Destroy, also on failure
				if !released {
					close(release)
				}
			}()
			block := k.block
			if block == nil {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				go func() { <-release; w.Write([]byte{1}); w.Close() }()
				// A blocking read(2) on the raw descriptor: the thread
				// sleeps in the kernel, not in the netpoller.
				fd := int(r.Fd()) // Fd puts the file in blocking mode
				block = func(<-chan struct{}) { readFD(fd) }
			}
			var aStarted, bQueued, bStarted atomic.Bool
			q.QueueOn(0, wq.NewWork(func() {
				aStarted.Store(true)
				// Stay runnable until B is pending, then block.
				for !bQueued.Load() {
				}
				block(release)
			}))
			waitFor(t, "item A to start", aStarted.Load)
			q.QueueOn(0, wq.NewWork(func() { bStarted.Store(true) }))
			bQueued.Store(true)
			deadline := time.Now().Add(10 * time.Second)
			for !bStarted.Load() {
				if time.Now().After(deadline) {
					f, a := wq.CMPolls()
					t.Fatalf("timed out waiting for item B to start while A blocks (%s); monitor samples fast=%d all=%d; %s", k.name, f, a, q.DumpState())
				}
				time.Sleep(200 * time.Microsecond)
			}
			close(release)
			released = true
			q.Flush()
		})
	}
}
