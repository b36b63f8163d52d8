//go:build cgo

package probe

import (
	"errors"
	"os"
	"sort"
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	lat, err := Run(Options{N: 200, Policy: Other, WaiterCPU: -1, WakerCPU: -1, Gap: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range lat {
		if v <= 0 {
			t.Fatalf("latency[%d] = %d ns, want > 0", i, v)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("SCHED_OTHER wake p50 %d ns max %d ns", lat[len(lat)/2], lat[len(lat)-1])
	if _, err := Run(Options{N: 0}); err == nil {
		t.Error("N=0 accepted")
	}
	if _, err := Run(Options{N: 1, Policy: FIFO, Priority: 0}); err == nil {
		t.Error("FIFO priority 0 accepted")
	}
}

func TestFIFO(t *testing.T) {
	_, err := Run(Options{N: 50, Policy: FIFO, Priority: 1, WaiterCPU: -1, WakerCPU: -1, Gap: 100 * time.Microsecond})
	if os.Geteuid() != 0 {
		if !errors.Is(err, syscall.EPERM) {
			t.Skipf("not root: err %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
}
