// Package threadattr reads back the scheduling class a thread actually
// runs at (policy, nice, RT priority) from /proc/<pid>/task/<tid>/stat,
// so that the lab reports what its threads ran at rather than what it
// asked for: under `nice -n 19`, or without CAP_SYS_NICE, a request for
// nice 0 or nice -20 may leave a thread at the inherited nice.
//
// It reads /proc through github.com/prometheus/procfs and needs no
// privilege for the process's own threads or those of its children.
package threadattr

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// ErrNoThreads is returned by Process for a process with no readable
// thread (it exited, or /proc is not mounted).
var ErrNoThreads = errors.New("threadattr: no readable thread")

// Attr is a thread's scheduling class as the kernel reports it.
type Attr struct {
	// Policy is "SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH",
	// "SCHED_IDLE", "SCHED_DEADLINE" or "policy N".
	Policy string `json:"policy"`
	// Nice is the nice value, -20..19 (the kernel reports it for every
	// policy; it only matters for SCHED_OTHER and SCHED_BATCH).
	Nice int `json:"nice"`
	// RTPrio is the real-time priority, 1..99 for SCHED_FIFO and
	// SCHED_RR, 0 otherwise.
	RTPrio int `json:"rt_prio,omitempty"`
}

// RT reports whether the policy is a real-time one (SCHED_FIFO or
// SCHED_RR).
func (a Attr) RT() bool { return a.Policy == "SCHED_FIFO" || a.Policy == "SCHED_RR" }

// String formats a as the lab's tables print it: "FIFO 1" or "RR 1" for
// real-time threads, "nice 19" for SCHED_OTHER, "BATCH nice 0" etc. for
// the other policies.
func (a Attr) String() string {
	switch {
	case a.RT():
		return fmt.Sprintf("%s %d", strings.TrimPrefix(a.Policy, "SCHED_"), a.RTPrio)
	case a.Policy == "SCHED_OTHER" || a.Policy == "":
		return fmt.Sprintf("nice %d", a.Nice)
	}
	return fmt.Sprintf("%s nice %d", strings.TrimPrefix(a.Policy, "SCHED_"), a.Nice)
}

// policyName names a sched(7) policy number.
func policyName(p uint) string {
	switch p {
	case unix.SCHED_NORMAL:
		return "SCHED_OTHER"
	case unix.SCHED_FIFO:
		return "SCHED_FIFO"
	case unix.SCHED_RR:
		return "SCHED_RR"
	case unix.SCHED_BATCH:
		return "SCHED_BATCH"
	case unix.SCHED_IDLE:
		return "SCHED_IDLE"
	case unix.SCHED_DEADLINE:
		return "SCHED_DEADLINE"
	}
	return fmt.Sprintf("policy %d", p)
}

// Read returns the scheduling class of thread tid of process pid. It
// returns the error of opening or parsing its stat file (the thread has
// exited, or /proc is not mounted). It does not block.
func Read(pid, tid int) (Attr, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return Attr{}, fmt.Errorf("threadattr: %w", err)
	}
	t, err := fs.Thread(pid, tid)
	if err != nil {
		return Attr{}, fmt.Errorf("threadattr: thread %d of %d: %w", tid, pid, err)
	}
	st, err := t.Stat()
	if err != nil {
		return Attr{}, fmt.Errorf("threadattr: thread %d of %d: %w", tid, pid, err)
	}
	return Attr{Policy: policyName(st.Policy), Nice: st.Nice, RTPrio: int(st.RTPriority)}, nil
}

// Self returns the scheduling class of the OS thread the calling
// goroutine runs on. The goroutine is locked to its thread for the call
// (a thread already locked stays locked), so the answer is the class of
// the thread that was running the caller: in a work function, the
// worker's. Errors as Read.
func Self() (Attr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return Read(os.Getpid(), unix.Gettid())
}

// Process returns the distinct scheduling classes of the threads of
// process pid, sorted by their String form; ErrNoThreads when none can
// be read.
func Process(pid int) ([]Attr, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("threadattr: %w", err)
	}
	ts, err := fs.AllThreads(pid)
	if err != nil {
		return nil, fmt.Errorf("threadattr: threads of %d: %w", pid, err)
	}
	var out []Attr
	for _, t := range ts {
		a, err := Read(pid, t.PID)
		if err != nil {
			continue // exited meanwhile
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: process %d", ErrNoThreads, pid)
	}
	slices.SortFunc(out, func(a, b Attr) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

// Join formats a set of classes as "nice 19" or "nice 0, nice 19"
// (several when the threads differ); "" for none.
func Join(as []Attr) string {
	var s []string
	for _, a := range as {
		if x := a.String(); !slices.Contains(s, x) {
			s = append(s, x)
		}
	}
	return strings.Join(s, ", ")
}
