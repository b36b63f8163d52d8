package sched

import (
	"golang.org/x/sys/unix"
)

// Nanosleep sleeps the calling thread for ns nanoseconds with
// clock_nanosleep(CLOCK_MONOTONIC), restarting after a signal until the
// time is up. Unlike time.Sleep it blocks the thread itself (no Go timer,
// no other thread's wake-up on the way back), so on a locked SCHED_FIFO
// thread, or one whose timer slack is 1 ns (SetTimerSlack), it returns
// within a few us of the deadline.
func Nanosleep(ns int64) {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		return
	}
	dl := unix.NsecToTimespec(now.Nano() + ns)
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &dl, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// SetTimerSlack sets the calling thread's timer slack to ns nanoseconds
// (prctl PR_SET_TIMERSLACK; no privilege needed). The default, 50 us for
// SCHED_OTHER threads, would stretch every short sleep by that much;
// SCHED_FIFO threads have none.
func SetTimerSlack(ns int64) error {
	return wrap("prctl(PR_SET_TIMERSLACK)", unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(ns), 0, 0, 0))
}

// ProcessCPUTime returns the CPU time all threads of this process have
// consumed, in ns (CLOCK_PROCESS_CPUTIME_ID).
func ProcessCPUTime() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
