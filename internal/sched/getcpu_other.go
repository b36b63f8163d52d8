//go:build !amd64

package sched

// fastCPU: no instruction-based CPU number on this architecture; GetCPU
// calls getcpu(2).
func fastCPU() (int, bool) { return 0, false }

// ThreadToken returns a value that tells the calling thread apart from
// every other live thread of the process: here its thread id (a system
// call).
func ThreadToken() uint64 { return uint64(Gettid()) }
