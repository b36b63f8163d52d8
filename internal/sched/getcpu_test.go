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

// TestThreadToken: the token is stable on one thread and differs between
// two threads alive at once.
func TestThreadToken(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := ThreadToken()
	if a == 0 || ThreadToken() != a {
		t.Fatalf("token %#x not stable on one thread", a)
	}
	other := make(chan uint64)
	hold := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other <- ThreadToken()
		<-hold
	}()
	b := <-other
	close(hold)
	if b == a {
		t.Fatalf("two live threads share token %#x", a)
	}
	t.Logf("tokens %#x %#x", a, b)
}
