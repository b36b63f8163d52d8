package wq_test

import (
	"testing"
	"time"

	"github.com/gowq/wq"
)

// Review rev1 (wake path, CPU accounting). Both tests run two items on
// the same worker: a per-CPU pool's running worker that queues an item on
// its own CPU runs it next (keep_working), as the CPU-intensive threshold
// is set high enough that the first item stays counted.

// rev1WaitCPUTime polls q's CPUTime until it is non-zero (the read at the
// worker's park), for at most 2 s.
func rev1WaitCPUTime(q *wq.Workqueue) time.Duration {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c := q.Stats().CPUTime; c > 0 {
			return c
		}
		time.Sleep(time.Millisecond)
	}
	return q.Stats().CPUTime
}

// TestRev1CPUAccountingOffThenOn: CPU used while accounting was off must
// not be charged, after SetCPUAccounting(true), to the next queue whose
// item the worker runs. (Failed before the fix: the whole burn of the
// first item, ~30 ms, went to the second queue's CPUTime.)
func TestRev1CPUAccountingOffThenOn(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	t.Cleanup(func() { wq.SetCPUAccounting(true) })
	qa := mustAlloc(t, "rev1_acct_a", wq.PerCPU, 0)
	qb := mustAlloc(t, "rev1_acct_b", wq.PerCPU, 0)
	wq.SetCPUAccounting(false)
	b := wq.NewWork(func() { wq.SetCPUAccounting(true) })
	qa.QueueOn(0, wq.NewWork(func() {
		obsSpinCPU(t, 30*time.Millisecond)
		qb.QueueOn(0, b)
	}))
	qa.Flush()
	qb.Flush()
	if c := rev1WaitCPUTime(qb); c > 10*time.Millisecond {
		t.Errorf("queue b's item took microseconds, but its CPUTime is %v: the CPU burnt with accounting off was charged to it", c)
	}
}

// TestRev1CPUAccountingOnThenOff: CPU used after SetCPUAccounting(false)
// must not be charged to the queue of the last item run with accounting on
// ("When off, CPUtime stays 0").
func TestRev1CPUAccountingOnThenOff(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	wq.SetCPUAccounting(true)
	t.Cleanup(func() { wq.SetCPUAccounting(true) })
	qc := mustAlloc(t, "rev1_acct_c", wq.PerCPU, 0)
	qd := mustAlloc(t, "rev1_acct_d", wq.PerCPU, 0)
	d := wq.NewWork(func() {
		wq.SetCPUAccounting(false)
		obsSpinCPU(t, 30*time.Millisecond)
	})
	qc.QueueOn(0, wq.NewWork(func() { qd.QueueOn(0, d) }))
	qc.Flush()
	qd.Flush()
	if c := rev1WaitCPUTime(qc); c > 10*time.Millisecond {
		t.Errorf("queue c's item took microseconds, but its CPUTime is %v: CPU burnt with accounting off was charged to it", c)
	}
	if c := qd.Stats().CPUTime; c > 10*time.Millisecond {
		t.Errorf("queue d ran with accounting off, CPUTime %v", c)
	}
}
