package wq

import (
	"errors"
	"fmt"

	"github.com/gowq/wq/internal/sched"
)

// Every thread gowq starts (pool workers, rescuers, escapers, the CM
// monitor, RT timer threads, attribute probes) goes through the thread
// gate, sched.GoLocked: it reads the thread limits (RLIMIT_NPROC, a pids
// cgroup's pids.max, kernel.threads-max and pid_max) before each creation
// and refuses one that would come within sched.GateMargin of a limit,
// because the Go runtime aborts the whole process when it cannot create a
// thread. internal/sched/gate.go explains the reading.

// threadErr turns a refusal of the thread gate into an error wrapping
// ErrThreadLimit that names the limit and says how to raise it; other
// errors pass unchanged.
func threadErr(err error) error {
	if err != nil && errors.Is(err, sched.ErrThreadLimit) && !errors.Is(err, ErrThreadLimit) {
		return fmt.Errorf("%w: %w", ErrThreadLimit, err)
	}
	return err
}

// goLocked starts fn on a new locked thread through the thread gate
// (sched.GoLocked); a refusal wraps ErrThreadLimit. It blocks for the
// limits' reading (about 20 us), not for the thread.
func goLocked(fn func()) error { return threadErr(sched.GoLocked(fn)) }

// checkThreadHeadroom reports an error wrapping ErrThreadLimit when the
// thread gate would refuse one more thread now (see goLocked); nil
// otherwise. Called before each attribute probe. It reads the limits
// (about 20 us).
func checkThreadHeadroom() error { return threadErr(sched.CheckThreads()) }
