// Package doctor is `wqlab doctor`: it tells a user what stands between
// this machine and the queue-to-start latency the lab shows. Each check
// reads one setting (privileges and limits, the RT throttle, CPU
// isolation, power management, steal time, timer slack, transparent huge
// pages, IRQs, tracefs) and reports OK, WARN or FAIL with the value found,
// why it matters for latency, and the exact remedy. Anchors: the kernel's
// rtla, rt-tests' hwlatdetect, tuned's realtime profile.
//
// Statuses: FAIL means a gowq class cannot be used at all in this context
// (SCHED_FIFO refused); WARN means it can, but with more latency or risk
// than needed; OK means nothing to do. A setting the machine does not have
// (no cpufreq or cpuidle in a VM, no /dev/cpu_dma_latency in a container)
// is OK with a value starting "not applicable", because there is nothing
// the user could change about it; a setting that exists but could not be
// read (a file only root may read) is a WARN that says so.
//
// Every reading goes through Env.Root, so that the checks are tested
// against fixture trees of /proc, /sys and /dev (testdata/good, testdata/bad).
// Only the timer slack (prctl) and the class diagnosis
// (labsys.DiagnoseClass) are not file reads; Env injects them.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/labsys"
)

// Status is a check's verdict.
type Status string

// The statuses, from best to worst.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Check is the result of one check.
type Check struct {
	// ID is a short stable name, e.g. "rlimit-rtprio".
	ID string `json:"id"`
	// Name is a human title, e.g. "RLIMIT_RTPRIO".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Value is what was found, e.g. "0 (soft), 0 (hard)".
	Value string `json:"value"`
	// Why says what the setting does to queue-to-start latency.
	Why string `json:"why"`
	// Remedy is the exact fix; "" when Status is OK.
	Remedy string `json:"remedy,omitempty"`
	// Error is set when a file that exists could not be read or parsed
	// in an unexpected way (not for "absent" or "permission denied",
	// which are findings).
	Error string `json:"error,omitempty"`
}

// Report is the result of Run: every check in a fixed order and the counts.
type Report struct {
	Checks []Check `json:"checks"`
	OK     int     `json:"ok"`
	Warn   int     `json:"warn"`
	Fail   int     `json:"fail"`
}

// IDs lists the check IDs in the order Run reports them.
var IDs = []string{
	"cap-sys-nice", "rlimit-rtprio", "rlimit-nice", "rlimit-memlock", "cgroup-rt-budget", "seccomp",
	"rt-throttle", "cpu-isolation", "cpu-affinity", "gomaxprocs", "cpufreq-governor", "cpuidle", "pm-qos",
	"steal", "timer-slack", "thp", "irqbalance", "irq-affinity", "tracefs",
}

// Env is where and how the checks read. The zero value reads this process
// on the real machine.
type Env struct {
	// Root is prepended to every path (/proc, /sys, /dev); "" is the real
	// machine.
	Root string
	// PID is the process whose limits, cgroup and affinity are read; 0
	// means this process.
	PID int
	// Sleep waits between the two /proc/stat samples of the steal check
	// (200 ms); nil is time.Sleep. Tests rewrite the fixture's stat file
	// in it.
	Sleep func(time.Duration)
	// TimerSlack returns the calling thread's timer slack in ns; nil is
	// prctl(PR_GET_TIMERSLACK).
	TimerSlack func() (int64, error)
	// Diagnose returns what blocks a scheduling class; nil is
	// labsys.DiagnoseClass (which reads the real process, whatever Root is).
	Diagnose func(labsys.ThreadAttr) []labsys.ClassBlocker
}

func (e *Env) path(p string) string {
	if e.Root == "" {
		return p
	}
	return filepath.Join(e.Root, p)
}

func (e *Env) pid() int {
	if e.PID == 0 {
		return os.Getpid()
	}
	return e.PID
}

// StealInterval is the time between the two /proc/stat samples.
const StealInterval = 200 * time.Millisecond

// Run runs every check and returns the report. It blocks for about
// StealInterval (the steal check samples /proc/stat twice) and returns
// early, with the checks done so far, when ctx is done. It changes
// nothing on the machine: /dev/cpu_dma_latency is opened for reading only,
// which adds no latency constraint. Safe from any goroutine.
func Run(ctx context.Context, env Env) Report {
	if env.Sleep == nil {
		env.Sleep = time.Sleep
	}
	if env.TimerSlack == nil {
		env.TimerSlack = func() (int64, error) {
			n, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
			return int64(n), err
		}
	}
	if env.Diagnose == nil {
		env.Diagnose = labsys.DiagnoseClass
	}
	m := newMachine(&env)
	var r Report
	for _, c := range m.all() {
		if ctx.Err() != nil {
			break
		}
		r.add(c())
	}
	// Blockers DiagnoseClass found that no check covers get a row each.
	for _, b := range m.unclaimed() {
		r.add(Check{ID: "blocker-" + slug(b.Cause), Name: b.Cause, Status: Fail, Value: b.Detail,
			Why: "the kernel will refuse the RT or high-priority class in this context", Remedy: b.Fix})
	}
	return r
}

func (r *Report) add(c Check) {
	switch c.Status {
	case OK:
		r.OK++
	case Warn:
		r.Warn++
	default:
		c.Status = Fail
		r.Fail++
	}
	r.Checks = append(r.Checks, c)
}

// Failed reports whether any check FAILed (wqlab doctor exits 1 then).
func (r *Report) Failed() bool { return r.Fail > 0 }

// Summary is the one-line summary the default wqlab suite prints, e.g.
// "doctor: 9 OK, 3 WARN, 0 FAIL — run `wqlab doctor` for details", with
// the names of the FAILed checks appended.
func (r *Report) Summary() string {
	s := fmt.Sprintf("doctor: %d OK, %d WARN, %d FAIL — run `wqlab doctor` for details", r.OK, r.Warn, r.Fail)
	var failed []string
	for _, c := range r.Checks {
		if c.Status == Fail {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) > 0 {
		s += " (FAIL: " + strings.Join(failed, ", ") + ")"
	}
	return s
}

// WriteText writes the report for people: one aligned row per check
// (status, name, value), then for each check that is not OK why it
// matters and the remedy; with verbose, why for the OK ones too.
func (r *Report) WriteText(w io.Writer, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tVALUE")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, oneLine(c.Value))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Checks {
		if c.Status == OK && !verbose {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: %s\n  why:    %s\n", c.Status, c.Name, oneLine(c.Value), c.Why)
		if c.Remedy != "" {
			fmt.Fprintf(w, "  remedy: %s\n", c.Remedy)
		}
		if c.Error != "" {
			fmt.Fprintf(w, "  error:  %s\n", c.Error)
		}
	}
	_, err := fmt.Fprintf(w, "\n%d OK, %d WARN, %d FAIL\n", r.OK, r.Warn, r.Fail)
	return err
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

func slug(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, s)
}
