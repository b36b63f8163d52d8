package sched

import (
	"runtime"
	"testing"
)

// TestGetCPUAgrees: on each CPU the thread can be pinned to, GetCPU (the
// instruction path where the machine has one) reports that CPU, as
// getcpu(2) does.
func TestGetCPUAgrees(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpus, err := Affinity(0)
	if err != nil {
		t.Skip("cannot read the thread's affinity:", err)
	}
	defer SetAffinity(0, cpus)
	_, fast := fastCPU()
	t.Logf("instruction path: %v (kind %d)", fast, fastKind())
	for _, c := range cpus {
		if err := SetAffinity(0, []int{c}); err != nil {
			t.Skip("cannot pin the test thread:", err)
		}
		if got := GetCPU(); got != c {
			t.Errorf("pinned to CPU %d, GetCPU = %d", c, got)
		}
		if got := getcpuSyscall(); got != c {
			t.Errorf("pinned to CPU %d, getcpu(2) = %d", c, got)
		}
	}
}
