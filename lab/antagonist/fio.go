package antagonist

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Fio runs the real fio with jobFile (for example
// testdata/seed-burn-8x90-qsort.fio) when fio is on PATH, and returns as
// soon as it has started. When runtime > 0 the group is sent SIGTERM after
// runtime (fio then stops its jobs and prints its report; Done is closed
// once it has exited), independent of any runtime= in the job file; with
// runtime 0 fio runs as the job file says until it ends or Stop is called.
// fio's standard output is kept (last 64 KiB) for Output. fio forks its
// jobs into the same process group, so Stop ends them too; if this process
// dies, Pdeathsig kills fio's main process, and its jobs end at their own
// runtime at the latest.
//
// It returns ErrNotInstalled when fio is not on PATH, ErrInvalidSpec when
// jobFile cannot be read or runtime is negative, or ErrChildStart. The
// caller must Stop the group.
func Fio(jobFile string, runtime time.Duration) (*Group, error) {
	if runtime < 0 {
		return nil, fmt.Errorf("%w: fio runtime %v is negative", ErrInvalidSpec, runtime)
	}
	path, err := exec.LookPath("fio")
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("%w: %v", ErrNotInstalled, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrChildStart, err)
	}
	f, err := os.Open(jobFile)
	if err != nil {
		return nil, fmt.Errorf("%w: fio job file: %v", ErrInvalidSpec, err)
	}
	f.Close()
	cmd := exec.Command(path, jobFile)
	label := "fio " + filepath.Base(jobFile)
	g, err := startGroup(label, []*exec.Cmd{cmd}, []string{label}, false, true)
	if err != nil {
		return nil, err
	}
	if runtime > 0 {
		g.timer = time.AfterFunc(runtime, func() { g.signal(syscall.SIGTERM) })
	}
	return g, nil
}
