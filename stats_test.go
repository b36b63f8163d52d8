package wq_test

import (
	"testing"
	"time"

	"github.com/gowq/wq"
)

// Stats after Destroy returns without a crash or a hang.
func TestStatsAfterDestroy(t *testing.T) {
	for _, flags := range []wq.Flags{wq.PerCPU, wq.Unbound} {
		q, _ := wq.Alloc("statsdestroy", flags, 0)
		for i := 0; i < 5; i++ {
			w := wq.NewWork(func() {})
			q.Queue(w)
			w.Flush()
		}
		q.Destroy()
		if s := q.Stats(); s.Total != 5 {
			t.Errorf("%v: Stats().Total after Destroy = %d, want 5", flags, s.Total)
		}
	}
}

// waitCPUTime polls q's CPUTime until it is non-zero (the read at the
// worker's park), for at most 2 s.
func waitCPUTime(q *wq.Workqueue) time.Duration {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if c := q.Stats().CPUTime; c > 0 {
			return c
		}
		time.Sleep(time.Millisecond)
	}
	return q.Stats().CPUTime
}

// TestCPUAccountingOffIsNotChargedLater: CPU used while accounting was off must
// not be charged, after SetCPUAccounting(true), to the next queue whose
// item the worker runs. (Failed before the fix: the whole burn of the
// first item, ~30 ms, went to the second queue's CPUTime.)
func TestCPUAccountingOffIsNotChargedLater(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	t.Cleanup(func() { wq.SetCPUAccounting(true) })
	qa := mustAlloc(t, "acct_a", wq.PerCPU, 0)
	qb := mustAlloc(t, "acct_b", wq.PerCPU, 0)
	wq.SetCPUAccounting(false)
	b := wq.NewWork(func() { wq.SetCPUAccounting(true) })
	qa.QueueOn(0, wq.NewWork(func() {
		obsSpinCPU(t, 30*time.Millisecond)
		qb.QueueOn(0, b)
	}))
	qa.Flush()
	qb.Flush()
	if c := waitCPUTime(qb); c > 10*time.Millisecond {
		t.Errorf("queue b's item took microseconds, but its CPUTime is %v: the CPU burnt with accounting off was charged to it", c)
	}
}

// TestCPUAccountingOffStopsCharging: CPU used after SetCPUAccounting(false)
// must not be charged to the queue of the last item run with accounting on
// ("When off, CPUtime stays 0").
func TestCPUAccountingOffStopsCharging(t *testing.T) {
	obsCPUIntensiveThresh(t, time.Hour)
	wq.SetCPUAccounting(true)
	t.Cleanup(func() { wq.SetCPUAccounting(true) })
	qc := mustAlloc(t, "acct_c", wq.PerCPU, 0)
	qd := mustAlloc(t, "acct_d", wq.PerCPU, 0)
	d := wq.NewWork(func() {
		wq.SetCPUAccounting(false)
		obsSpinCPU(t, 30*time.Millisecond)
	})
	qc.QueueOn(0, wq.NewWork(func() { qd.QueueOn(0, d) }))
	qc.Flush()
	qd.Flush()
	if c := waitCPUTime(qc); c > 10*time.Millisecond {
		t.Errorf("queue c's item took microseconds, but its CPUTime is %v: CPU burnt with accounting off was charged to it", c)
	}
	if c := qd.Stats().CPUTime; c > 10*time.Millisecond {
		t.Errorf("queue d ran with accounting off, CPUTime %v", c)
	}
}
