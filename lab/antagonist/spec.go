package antagonist

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/labsys"
)

// Errors returned by this package; test with errors.Is. Returned errors
// wrap one of these and, where a system call failed, its syscall.Errno.
var (
	// ErrInvalidSpec is returned for a spec field out of range.
	ErrInvalidSpec = errors.New("antagonist: invalid spec")
	// ErrPermission is returned when a child cannot get the nice value,
	// scheduling policy or priority it was asked for (EPERM/EACCES: a
	// negative nice or SCHED_FIFO/SCHED_RR needs CAP_SYS_NICE or a
	// matching RLIMIT_NICE/RLIMIT_RTPRIO). A spec is never silently
	// degraded.
	ErrPermission = errors.New("antagonist: permission denied")
	// ErrRTUnthrottled is returned when a real-time hog at 100% duty is
	// requested but kernel RT throttling is disabled or cannot be
	// verified; see HogSpec.
	ErrRTUnthrottled = errors.New("antagonist: RT throttling disabled")
	// ErrNotInstalled is returned by Fio when the fio binary is not on PATH.
	ErrNotInstalled = errors.New("antagonist: fio not installed")
	// ErrChildStart is returned when a child process could not be started
	// or did not report ready.
	ErrChildStart = errors.New("antagonist: child failed to start")
)

// Mode is the busy work of a burner, named after fio's cpumode.
type Mode string

const (
	// ModeQsort (the default) mirrors fio cpumode=qsort: each busy chunk
	// is one round of four sorts of 256Ki int32 (ascending, descending,
	// bytewise over the same 1 MiB, descending again), and the job then
	// sleeps busy*(100-load)/load, so that the duty cycle is kept whatever
	// the sort costs on this machine and under this contention.
	ModeQsort Mode = "qsort"
	// ModeNoop mirrors fio cpumode=noop: spin for CycleMs, then sleep
	// CycleMs*(100-load)/load.
	ModeNoop Mode = "noop"
)

// Policy is the scheduling policy of a hog. Its values are the kernel's
// SCHED_* constants.
type Policy int

// The policies a hog can run under.
const (
	PolicyOther Policy = unix.SCHED_NORMAL // SCHED_OTHER: nice applies (default)
	PolicyFIFO  Policy = unix.SCHED_FIFO   // SCHED_FIFO with Priority 1..99
	PolicyRR    Policy = unix.SCHED_RR     // SCHED_RR with Priority 1..99
)

// String returns the kernel name of the policy, e.g. "SCHED_FIFO".
func (p Policy) String() string {
	switch p {
	case PolicyOther:
		return "SCHED_OTHER"
	case PolicyFIFO:
		return "SCHED_FIFO"
	case PolicyRR:
		return "SCHED_RR"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Limits on spec fields.
const (
	MaxJobs    = 256    // most burner processes in one group
	MaxHogs    = 64     // most hog processes in one group
	MaxCycleMs = 10_000 // longest busy chunk / period, ms
)

// BurnerSpec describes a group of CPU burners equivalent to fio
// ioengine=cpuio (see testdata/seed-burn-8x90-qsort.fio). Zero fields take
// the defaults noted, so BurnerSpec{} is numjobs=8 cpuload=90 cpumode=qsort.
type BurnerSpec struct {
	Jobs    int  // number of burner processes (fio numjobs); 0 means 8; 1..MaxJobs
	LoadPct int  // busy share of each cycle in % (fio cpuload); 0 means 90; 1..100
	Mode    Mode // busy work (fio cpumode); "" means ModeQsort
	// CycleMs is the busy chunk in ms for ModeNoop (fio cpuchunks, which
	// fio gives in us); 0 means 50; 1..MaxCycleMs. ModeQsort ignores it,
	// as fio does: there the chunk is one sort round.
	CycleMs int
	// CPUs, when not empty, confines every job to these CPUs (fio
	// cpus_allowed); each must be allowed for this process. Empty means
	// the inherited affinity.
	CPUs []int
	// SplitCPUs gives job i only CPUs[i%len(CPUs)] (fio
	// cpus_allowed_policy=split). Needs CPUs.
	SplitCPUs bool
	// Nice is the nice value of the jobs, -20..19; 0 leaves the inherited
	// value. Negative values need CAP_SYS_NICE (else ErrPermission).
	Nice int
}

func (s *BurnerSpec) normalize() error {
	if s.Jobs == 0 {
		s.Jobs = 8
	}
	if s.LoadPct == 0 {
		s.LoadPct = 90
	}
	if s.Mode == "" {
		s.Mode = ModeQsort
	}
	if s.CycleMs == 0 {
		s.CycleMs = 50
	}
	switch {
	case s.Jobs < 1 || s.Jobs > MaxJobs:
		return fmt.Errorf("%w: burner Jobs %d not in 1..%d", ErrInvalidSpec, s.Jobs, MaxJobs)
	case s.LoadPct < 1 || s.LoadPct > 100:
		return fmt.Errorf("%w: burner LoadPct %d not in 1..100", ErrInvalidSpec, s.LoadPct)
	case s.Mode != ModeQsort && s.Mode != ModeNoop:
		return fmt.Errorf("%w: burner Mode %q is neither %q nor %q", ErrInvalidSpec, s.Mode, ModeQsort, ModeNoop)
	case s.CycleMs < 1 || s.CycleMs > MaxCycleMs:
		return fmt.Errorf("%w: burner CycleMs %d not in 1..%d", ErrInvalidSpec, s.CycleMs, MaxCycleMs)
	case s.SplitCPUs && len(s.CPUs) == 0:
		return fmt.Errorf("%w: burner SplitCPUs needs CPUs", ErrInvalidSpec)
	}
	if err := checkNice(s.Nice); err != nil {
		return err
	}
	return checkCPUs(s.CPUs)
}

// HogSpec describes CPU hogs like seed 004's antagonist (`stress --cpu`
// under `taskset 01`, reniced to -20 and boosted): processes pinned to one
// CPU that spin.
//
// Safety: a SCHED_FIFO/SCHED_RR hog that never sleeps leaves its CPU to
// lower classes only through the kernel's RT throttling
// (/proc/sys/kernel/sched_rt_runtime_us, by default 950000 us per 1000000
// us period, and on newer kernels the fair deadline server). With
// throttling disabled (-1) such a hog would starve its CPU, kworkers and
// all, for as long as it runs. So an RT hog with DutyPct 100 is refused
// with ErrRTUnthrottled unless sched_rt_runtime_us is readable and below
// sched_rt_period_us; an RT hog with DutyPct < 100 throttles itself and is
// always allowed.
type HogSpec struct {
	CPU   int // the CPU every hog is pinned to; must be allowed for this process
	Procs int // number of hog processes on that CPU (`stress --cpu N`); 0 means 1; 1..MaxHogs
	// Nice is the nice value, -20..19; 0 leaves the inherited value.
	// Negative values need CAP_SYS_NICE (else ErrPermission).
	Nice     int
	Policy   Policy // PolicyOther (default), PolicyFIFO or PolicyRR
	Priority int    // RT priority 1..99 for FIFO/RR; must be 0 for PolicyOther
	// DutyPct is the share of each period spent spinning, 1..100; 0 means
	// 100 (spin forever).
	DutyPct int
	// PeriodMs is the duty-cycle period in ms when DutyPct < 100; 0 means
	// 100; 1..MaxCycleMs.
	PeriodMs int
}

func (s *HogSpec) normalize() error {
	if s.Procs == 0 {
		s.Procs = 1
	}
	if s.DutyPct == 0 {
		s.DutyPct = 100
	}
	if s.PeriodMs == 0 {
		s.PeriodMs = 100
	}
	switch {
	case s.Procs < 1 || s.Procs > MaxHogs:
		return fmt.Errorf("%w: hog Procs %d not in 1..%d", ErrInvalidSpec, s.Procs, MaxHogs)
	case s.DutyPct < 1 || s.DutyPct > 100:
		return fmt.Errorf("%w: hog DutyPct %d not in 1..100", ErrInvalidSpec, s.DutyPct)
	case s.PeriodMs < 1 || s.PeriodMs > MaxCycleMs:
		return fmt.Errorf("%w: hog PeriodMs %d not in 1..%d", ErrInvalidSpec, s.PeriodMs, MaxCycleMs)
	}
	switch s.Policy {
	case PolicyOther:
		if s.Priority != 0 {
			return fmt.Errorf("%w: hog Priority %d needs PolicyFIFO or PolicyRR", ErrInvalidSpec, s.Priority)
		}
	case PolicyFIFO, PolicyRR:
		if s.Priority < 1 || s.Priority > 99 {
			return fmt.Errorf("%w: hog %v Priority %d not in 1..99", ErrInvalidSpec, s.Policy, s.Priority)
		}
	default:
		return fmt.Errorf("%w: hog %v unknown", ErrInvalidSpec, s.Policy)
	}
	if err := checkNice(s.Nice); err != nil {
		return err
	}
	return checkCPUs([]int{s.CPU})
}

func checkNice(n int) error {
	if n < -20 || n > 19 {
		return fmt.Errorf("%w: Nice %d not in -20..19", ErrInvalidSpec, n)
	}
	return nil
}

// checkCPUs verifies that every CPU is in this process's affinity mask.
func checkCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	allowed, err := labsys.ThreadAffinity()
	if err != nil {
		return fmt.Errorf("antagonist: %w", err)
	}
	for _, c := range cpus {
		if !slices.Contains(allowed, c) {
			return fmt.Errorf("%w: CPU %d not allowed for this process (allowed: %v)", ErrInvalidSpec, c, allowed)
		}
	}
	return nil
}

// allowedCPUCount is the number of CPUs in this process's affinity mask, 0
// when it cannot be read.
func allowedCPUCount() int {
	allowed, err := labsys.ThreadAffinity()
	if err != nil {
		return 0
	}
	return len(allowed)
}

// childSpec is what the parent passes to a child in the environment.
type childSpec struct {
	Kind     string `json:"kind"` // kindBurner or kindHog
	Mode     Mode   `json:"mode,omitempty"`
	LoadPct  int    `json:"load_pct,omitempty"`
	CycleUs  int    `json:"cycle_us,omitempty"`
	DutyPct  int    `json:"duty_pct,omitempty"`
	PeriodUs int    `json:"period_us,omitempty"`
	CPUs     []int  `json:"cpus,omitempty"`
	Nice     int    `json:"nice,omitempty"`
	Policy   Policy `json:"policy,omitempty"`
	Priority int    `json:"priority,omitempty"`
}

const (
	kindBurner = "burner"
	kindHog    = "hog"
)

func (s BurnerSpec) childSpec(job int) childSpec {
	cs := childSpec{
		Kind:    kindBurner,
		Mode:    s.Mode,
		LoadPct: s.LoadPct,
		CycleUs: s.CycleMs * 1000,
		CPUs:    slices.Clone(s.CPUs),
		Nice:    s.Nice,
	}
	if s.SplitCPUs {
		cs.CPUs = []int{s.CPUs[job%len(s.CPUs)]}
	}
	return cs
}

func (s HogSpec) childSpec() childSpec {
	return childSpec{
		Kind:     kindHog,
		DutyPct:  s.DutyPct,
		PeriodUs: s.PeriodMs * 1000,
		CPUs:     []int{s.CPU},
		Nice:     s.Nice,
		Policy:   s.Policy,
		Priority: s.Priority,
	}
}
