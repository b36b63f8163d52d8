package antagonist

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Where the kernel's RT throttling knobs live; variables for tests.
var (
	rtRuntimePath = "/proc/sys/kernel/sched_rt_runtime_us"
	rtPeriodPath  = "/proc/sys/kernel/sched_rt_period_us"
)

// checkRTThrottling returns nil when RT tasks are throttled, that is when
// sched_rt_runtime_us is at least 0 and below sched_rt_period_us, so that
// an RT task spinning forever still leaves each CPU
// (period-runtime)/period of its time (5% by default) to other classes.
// Otherwise, or when the knobs cannot be read, it returns an error
// wrapping ErrRTUnthrottled that says why.
func checkRTThrottling() error {
	runtime, err := readIntFile(rtRuntimePath)
	if err != nil {
		return fmt.Errorf("%w: cannot verify RT throttling: %v; an RT hog at 100%% duty could starve its CPU, use DutyPct < 100", ErrRTUnthrottled, err)
	}
	period, err := readIntFile(rtPeriodPath)
	if err != nil {
		return fmt.Errorf("%w: cannot verify RT throttling: %v; an RT hog at 100%% duty could starve its CPU, use DutyPct < 100", ErrRTUnthrottled, err)
	}
	if runtime < 0 || runtime >= period {
		return fmt.Errorf("%w: %s is %d (period %d us): an RT hog at 100%% duty would starve its CPU, kworkers included, "+
			"for as long as it runs; set it to e.g. 950000 or use DutyPct < 100", ErrRTUnthrottled, rtRuntimePath, runtime, period)
	}
	return nil
}

func readIntFile(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
