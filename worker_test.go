package wq_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/internal/sched"
)

// TestCPUTimeOfShortItemsIsCharged: short items (well under the 50 us
// after which an item's end reads the CPU clock) on a thread-backed queue
// are charged within the documented lag: once the items are done,
// Stats().CPUTime reaches their CPU less 1 ms per worker that ran them.
// Fault caught: a worker that reads its clock neither per park nor per
// 1 ms of wall time, whose short items are never charged.
func TestCPUTimeOfShortItemsIsCharged(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	labsys.SetCPUAccounting(true) // the default
	q := mustAlloc(t, "cpu_short", wq.PerCPU, 0)
	const n = 1000
	var (
		mu   sync.Mutex
		used time.Duration
		tids = map[int]bool{}
	)
	works := make([]*wq.Work, n)
	for i := range works {
		works[i] = wq.NewWork(func() {
			c0 := sched.SelfCPUTime()
			obsSpinCPU(t, 10*time.Microsecond)
			c := time.Duration(sched.SelfCPUTime() - c0)
			mu.Lock()
			used += c
			tids[sched.Gettid()] = true
			mu.Unlock()
		})
	}
	for i, w := range works {
		q.QueueOn(0, w)
		if i%16 == 15 {
			q.Flush() // the worker parks now and then, as in a real program
		}
	}
	q.Flush()
	mu.Lock()
	want := used - time.Duration(len(tids))*time.Millisecond
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	got := q.Stats().CPUTime
	for got < want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = q.Stats().CPUTime
	}
	if got < want {
		t.Errorf("items used %v of CPU on %d worker threads; Stats().CPUTime %v, want at least %v (1 ms of lag per worker)", used, len(tids), got, want)
	}
}
