//go:build !amd64

package sched

// rdtsc: no counter instruction wired on this architecture; ParkWait
// uses the clock_gettime stamp (haveRDTSC false).
//
//go:nosplit
func rdtsc() uint64 { return 0 }

const haveRDTSC = false
