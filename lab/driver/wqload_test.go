package driver

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSpinUsesItsCPUTime: Spin(d) burns about d of the thread's CPU time
// (within a factor of 3: the calibration and the run share a loaded
// machine's caches and frequency).
func TestSpinUsesItsCPUTime(t *testing.T) {
	cpu := func() time.Duration {
		var ts unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
		return time.Duration(ts.Nano())
	}
	spinRate()
	for attempt := 0; ; attempt++ {
		// A locked thread: the CPU clock read before and after is one
		// thread's.
		done := make(chan time.Duration)
		go func() {
			lockThread()
			t0 := cpu()
			Spin(20 * time.Millisecond)
			done <- cpu() - t0
		}()
		got := <-done
		if got >= 20*time.Millisecond/3 && got <= 3*20*time.Millisecond {
			return
		}
		if attempt == 4 {
			t.Fatalf("Spin(20ms) used %v of CPU", got)
		}
	}
}

func lockThread() { runtime.LockOSThread() }
