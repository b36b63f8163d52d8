//go:build !amd64

package sched

// fastCPU: no instruction-based CPU number on this architecture; GetCPU
// calls getcpu(2).
func fastCPU() (int, bool) { return 0, false }
