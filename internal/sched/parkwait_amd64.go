package sched

// rdtsc reads the time-stamp counter. NOSPLIT, no frame: callable inside
// the system-call window of futexWaitTicks.
func rdtsc() uint64

const haveRDTSC = true
