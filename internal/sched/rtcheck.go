package sched

// What stands between this process and a scheduling class.
//
// The kernel refuses sched_setattr(2) with EPERM for several unrelated
// reasons, and the error number does not say which. __sched_setscheduler
// checks, in order:
//
//   - privilege: without CAP_SYS_NICE (capable(): in the initial user
//     namespace), an RT policy needs RLIMIT_RTPRIO >= the priority (and
//     > 0), and a nice below the thread's current one needs RLIMIT_NICE
//     >= 20 - nice;
//   - with RT group scheduling (CONFIG_RT_GROUP_SCHED), an RT policy needs
//     a non-zero cpu.rt_runtime_us in the task's cpu cgroup (cgroup v1; a
//     new child group starts at 0, as Docker leaves it). On cgroup v2 the
//     groups have no budget file, so RT tasks may only run in the root
//     group while the cpu controller is enabled;
//   - kernel.sched_rt_runtime_us = 0 leaves RT tasks no CPU time (-1 turns
//     throttling off, which is allowed);
//   - seccomp filters (container runtimes) may fail the call before any of
//     this.
//
// DiagnoseClass reads these from /proc and /sys without making a thread;
// DiagnoseRefusal is for a class the kernel has just refused, and adds the
// causes that only a refusal points to (seccomp), or says that none was
// found. Both are meant for error paths and the doctor: a few small file
// reads, never on a hot path.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// Blocker is one reason why this process cannot use a scheduling class,
// found by DiagnoseClass: Cause is a short, stable name ("CAP_SYS_NICE",
// "RLIMIT_RTPRIO", "RLIMIT_NICE", "cgroup cpu.rt_runtime_us", "cgroup v2
// RT group scheduling", "sched_rt_runtime_us", "seccomp", "unknown"),
// Detail the value found (with the cgroup path where one is involved),
// Fix the exact remedy.
type Blocker struct {
	Cause  string
	Detail string
	Fix    string
}

// String is "Cause: Detail; fix: Fix".
func (b Blocker) String() string {
	return b.Cause + ": " + b.Detail + "; fix: " + b.Fix
}

// Causes of blockers.
const (
	CauseCap        = "CAP_SYS_NICE"
	CauseRTPrio     = "RLIMIT_RTPRIO"
	CauseNice       = "RLIMIT_NICE"
	CauseCgroupRT   = "cgroup cpu.rt_runtime_us"
	CauseCgroupV2RT = "cgroup v2 RT group scheduling"
	CauseSysctlRT   = "sched_rt_runtime_us"
	CauseSeccomp    = "seccomp"
	CauseUnknown    = "unknown"
)

// DiagnoseClass returns what stands between this process and class a
// (SCHED_FIFO/RR at a priority, or SCHED_OTHER at a nice): every
// blocker found, most likely first; none when the class can be used as
// far as can be told without trying. It reads the capabilities, rlimits
// and seccomp state (/proc/self/status, /proc/self/limits), the
// process's cpu cgroup and its ancestors, and kernel.sched_rt_runtime_us;
// it makes no thread. It blocks for a few small file reads; safe from any
// goroutine. Files that cannot be read are treated as imposing nothing.
func DiagnoseClass(a Attr) []Blocker { return realDiag().diagnose(a, false) }

// DiagnoseRefusal is DiagnoseClass for a class the kernel has refused
// (EPERM from sched_setattr): when no static cause is found it names a
// seccomp filter if one is installed, else returns one blocker with Cause
// "unknown" that says what was checked. Never empty.
func DiagnoseRefusal(a Attr) []Blocker { return realDiag().diagnose(a, true) }

// Explain formats DiagnoseRefusal(a) for an error text: the blockers'
// String()s joined with " | ".
func Explain(a Attr) string { return formatBlockers(DiagnoseRefusal(a)) }

func formatBlockers(bs []Blocker) string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = b.String()
	}
	return strings.Join(s, " | ")
}

// diagReader reads a /proc and /sys tree under root ("" is the real one).
type diagReader struct {
	root   string
	pid    int
	initNS func() bool // the process runs in the initial user namespace
}

func realDiag() *diagReader { return &diagReader{pid: os.Getpid(), initNS: inInitUserNS} }

func (r *diagReader) path(p string) string {
	if r.root == "" {
		return p
	}
	return filepath.Join(r.root, p)
}

func (r *diagReader) proc(file string) string {
	return r.path(fmt.Sprintf("/proc/%d/%s", r.pid, file))
}

// procState is what /proc/<pid>/status, limits and stat say.
type procState struct {
	capEff     uint64
	capKnown   bool
	seccomp    int // 0 off, 1 strict, 2 filter
	filters    int
	noNewPrivs bool
	rtprio     uint64 // soft RLIMIT_RTPRIO
	nice       uint64 // soft RLIMIT_NICE
	curNice    int    // the process's nice
}

func (r *diagReader) state() procState {
	st := procState{rtprio: 0, nice: 0}
	if b, err := os.ReadFile(r.proc("status")); err == nil {
		for line := range strings.Lines(string(b)) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "CapEff":
				if n, err := strconv.ParseUint(v, 16, 64); err == nil {
					st.capEff, st.capKnown = n, true
				}
			case "Seccomp":
				st.seccomp, _ = strconv.Atoi(v)
			case "Seccomp_filters":
				st.filters, _ = strconv.Atoi(v)
			case "NoNewPrivs":
				st.noNewPrivs = v == "1"
			}
		}
	}
	if !st.capKnown {
		st.capEff, st.capKnown = 0, true
		if HasCapSysNice() && r.root == "" {
			st.capEff = 1 << capSysNice
		}
	}
	if fs, err := procfs.NewFS(r.path("/proc")); err == nil {
		if p, err := fs.Proc(r.pid); err == nil {
			if l, err := p.Limits(); err == nil {
				st.rtprio, st.nice = clampRlimit(l.RealtimePriority), clampRlimit(l.NicePriority)
			}
			if s, err := p.Stat(); err == nil {
				st.curNice = s.Nice
			}
		}
	}
	return st
}

// clampRlimit maps procfs's "unlimited" (-1 as uint64) to MaxUint64.
func clampRlimit(v uint64) uint64 {
	if v > math.MaxInt32 {
		return math.MaxUint64
	}
	return v
}

func (r *diagReader) diagnose(a Attr, refused bool) []Blocker {
	var out []Blocker
	st := r.state()
	rt := a.Policy == PolicyFIFO || a.Policy == PolicyRR
	hasCap := st.capEff&(1<<capSysNice) != 0
	initNS := r.initNS == nil || r.initNS()
	capNote := fmt.Sprintf("CapEff %016x", st.capEff)
	if hasCap && !initNS {
		capNote += ", but only inside a user namespace (the kernel checks CAP_SYS_NICE in the initial one)"
		hasCap = false
	}
	nnp := ""
	if st.noNewPrivs {
		nnp = "; no_new_privs is set, so file capabilities (setcap) are ignored at exec: grant it as an ambient capability or from the parent"
	}
	grant := "run as root, or `setcap cap_sys_nice+ep <binary>`, or systemd AmbientCapabilities=CAP_SYS_NICE, or docker/podman --cap-add SYS_NICE, or Kubernetes securityContext.capabilities.add [SYS_NICE]"
	switch {
	case rt && !hasCap && st.rtprio < uint64(a.Priority):
		cause := CauseCap
		if st.rtprio > 0 {
			cause = CauseRTPrio
		}
		out = append(out, Blocker{
			Cause: cause,
			Detail: fmt.Sprintf("%s priority %d needs CAP_SYS_NICE or RLIMIT_RTPRIO >= %d; the process lacks CAP_SYS_NICE (%s) and RLIMIT_RTPRIO is %d%s",
				a.Policy, a.Priority, a.Priority, capNote, st.rtprio, nnp),
			Fix: fmt.Sprintf("raise RLIMIT_RTPRIO to %d or more (`ulimit -r %d`, `prlimit --rtprio=%d`, rtprio in /etc/security/limits.conf, systemd LimitRTPRIO=%d, docker --ulimit rtprio=%d), or %s",
				a.Priority, a.Priority, a.Priority, a.Priority, a.Priority, grant),
		})
	case !rt && a.Nice < st.curNice && !hasCap && 20-int64(min(st.nice, 40)) > int64(a.Nice):
		cause := CauseCap
		if st.nice > 0 {
			cause = CauseNice
		}
		need := 20 - a.Nice
		out = append(out, Blocker{
			Cause: cause,
			Detail: fmt.Sprintf("nice %d (below the process's nice %d) needs CAP_SYS_NICE or RLIMIT_NICE >= %d; the process lacks CAP_SYS_NICE (%s) and RLIMIT_NICE is %d (nice floor %d)%s",
				a.Nice, st.curNice, need, capNote, st.nice, 20-int64(min(st.nice, 40)), nnp),
			Fix: fmt.Sprintf("raise RLIMIT_NICE to %d (`ulimit -e %d`, `prlimit --nice=%d`, nice in /etc/security/limits.conf, systemd LimitNICE=%d), or %s",
				need, need, need, need, grant),
		})
	}
	if rt {
		out = append(out, r.cgroupRT()...)
		if v, err := readInt(r.path("/proc/sys/kernel/sched_rt_runtime_us")); err == nil && v == 0 {
			out = append(out, Blocker{
				Cause:  CauseSysctlRT,
				Detail: "kernel.sched_rt_runtime_us is 0: RT tasks get no CPU time (RT is disabled system-wide; refused where RT group scheduling is on, throttled at once otherwise)",
				Fix:    "`sysctl -w kernel.sched_rt_runtime_us=950000` (the default; -1 turns throttling off), and kernel.sched_rt_runtime_us in /etc/sysctl.d/",
			})
		}
	}
	if !refused || len(out) > 0 {
		return out
	}
	if st.seccomp == 2 {
		return []Blocker{{
			Cause: CauseSeccomp,
			Detail: fmt.Sprintf("the kernel refused %s although capabilities, rlimits and cgroups allow it, and a seccomp filter is installed (Seccomp: 2, %d filter(s); no_new_privs %v): a container runtime's profile most likely fails sched_setattr",
				a, st.filters, st.noNewPrivs),
			Fix: "allow sched_setattr and sched_setscheduler in the seccomp profile (docker/podman --security-opt seccomp=<profile.json>, Kubernetes securityContext.seccompProfile), or run without the filter",
		}}
	}
	return []Blocker{{
		Cause:  CauseUnknown,
		Detail: fmt.Sprintf("the kernel refused %s; CAP_SYS_NICE, RLIMIT_RTPRIO/RLIMIT_NICE, the cpu cgroup's RT budget, kernel.sched_rt_runtime_us and seccomp show no reason", a),
		Fix:    "check a Linux security module (SELinux, AppArmor) and the container runtime; `go run ./cmd/wqlab doctor` lists what it finds",
	}}
}

// String describes a as "SCHED_FIFO priority 1" or "SCHED_OTHER nice -20".
func (a Attr) String() string {
	if a.Policy == PolicyFIFO || a.Policy == PolicyRR {
		return fmt.Sprintf("%s priority %d", a.Policy, a.Priority)
	}
	return fmt.Sprintf("%s nice %d", a.Policy, a.Nice)
}

// cgroupRT returns the blockers of the process's cpu cgroup for an RT
// class: on cgroup v1 (or a v2 kernel that has the file) the innermost
// group whose cpu.rt_runtime_us is 0, naming it and any ancestor at 0
// too; on cgroup v2 without budget files, a non-root group with the cpu
// controller enabled on a kernel built with CONFIG_RT_GROUP_SCHED.
func (r *diagReader) cgroupRT() []Blocker {
	b, err := os.ReadFile(r.proc("cgroup"))
	if err != nil {
		return nil
	}
	fs, err := procfs.NewFS(r.path("/proc"))
	if err != nil {
		return nil
	}
	p, err := fs.Proc(r.pid)
	if err != nil {
		return nil
	}
	mounts, err := p.MountInfo()
	if err != nil {
		return nil
	}
	var v2Path, v2Top string
	v2 := false
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		isV2 := f[0] == "0" && f[1] == ""
		if !isV2 && !slices.Contains(strings.Split(f[1], ","), "cpu") {
			continue
		}
		for _, m := range mounts {
			if isV2 && m.FSType != "cgroup2" {
				continue
			}
			if !isV2 {
				if _, ok := m.SuperOptions["cpu"]; m.FSType != "cgroup" || !ok {
					continue
				}
			}
			dirs := walkUp(r.path(m.MountPoint), m.Root, f[2], "cpu.rt_runtime_us")
			if dirs == nil {
				continue // not inside this mount
			}
			if bl, ok := r.zeroBudget(dirs); ok {
				return []Blocker{bl}
			}
			if len(dirs) > 0 {
				return nil // a budget file exists and is not 0: RT group scheduling allows it
			}
			if isV2 {
				if d := walkUp(r.path(m.MountPoint), m.Root, f[2], ""); len(d) > 0 {
					v2, v2Path, v2Top = true, d[0], r.path(m.MountPoint)
				}
			}
			break
		}
	}
	if !v2 || v2Path == "" {
		return nil
	}
	if v2Path == v2Top || r.rtGroupSched() != "y" {
		return nil // the root group, or RT group scheduling is off (or unknown)
	}
	parent, _ := os.ReadFile(filepath.Join(filepath.Dir(v2Path), "cgroup.subtree_control"))
	if !slices.Contains(strings.Fields(string(parent)), "cpu") {
		return nil
	}
	return []Blocker{{
		Cause: CauseCgroupV2RT,
		Detail: fmt.Sprintf("the process is in cgroup v2 group %s, with the cpu controller enabled, and the kernel has CONFIG_RT_GROUP_SCHED: cgroup v2 gives its groups no RT budget (no cpu.rt_runtime_us), so RT tasks are only allowed in the root group",
			r.unroot(v2Path)),
		Fix: "run the process in the root cgroup, or disable the cpu controller for its subtree (remove cpu from the parents' cgroup.subtree_control; systemd: no CPUWeight=/CPUQuota= on the unit and its slice, DisableControllers=cpu), or use a kernel without CONFIG_RT_GROUP_SCHED",
	}}
}

// zeroBudget looks for cpu.rt_runtime_us = 0 in dirs (innermost first).
func (r *diagReader) zeroBudget(dirs []string) (Blocker, bool) {
	var zero []string
	for _, d := range dirs {
		v, err := readInt(filepath.Join(d, "cpu.rt_runtime_us"))
		if err == nil && v == 0 {
			zero = append(zero, d)
		}
	}
	if len(zero) == 0 {
		return Blocker{}, false
	}
	inner := r.unroot(zero[0])
	detail := fmt.Sprintf("cpu.rt_runtime_us is 0 in cgroup %s", inner)
	if zero[0] == dirs[0] {
		detail += " (the process's cpu cgroup)"
	} else {
		detail += fmt.Sprintf(" (an ancestor of the process's cpu cgroup %s)", r.unroot(dirs[0]))
	}
	detail += ": with RT group scheduling, an RT task needs a non-zero RT budget in its group, and a new group starts at 0 (as Docker leaves it)"
	var writes []string
	for i := len(dirs) - 1; i >= 0; i-- { // outermost first: a child may not have more than its parent
		v, err := readInt(filepath.Join(dirs[i], "cpu.rt_runtime_us"))
		if err == nil && v == 0 {
			writes = append(writes, fmt.Sprintf("echo 100000 > %s", filepath.Join(r.unroot(dirs[i]), "cpu.rt_runtime_us")))
		}
	}
	return Blocker{
		Cause:  CauseCgroupRT,
		Detail: detail,
		Fix: fmt.Sprintf("give the group an RT budget in us per cpu.rt_period_us, outermost first (`%s`; the groups' budgets must fit within their parent's), or run in a group that has one; "+
			"Docker/Podman on cgroup v1: --cpu-rt-runtime=100000 (the daemon needs --cpu-rt-runtime too); systemd: keep the unit out of the cpu controller (no CPUAccounting=/CPUShares=/CPUQuota=) or write the budget in ExecStartPre=",
			strings.Join(writes, " && ")),
	}, true
}

// unroot strips the test root from p.
func (r *diagReader) unroot(p string) string {
	if r.root == "" {
		return p
	}
	if rel, err := filepath.Rel(r.root, p); err == nil {
		return "/" + rel
	}
	return p
}

// rtGroupSched returns CONFIG_RT_GROUP_SCHED's value ("y", "" for not
// set) from /proc/config.gz or /boot/config-<release>; "?" if unknown.
func (r *diagReader) rtGroupSched() string {
	var cfg []byte
	if f, err := os.Open(r.path("/proc/config.gz")); err == nil {
		if z, err := gzip.NewReader(f); err == nil {
			cfg, _ = io.ReadAll(z)
		}
		f.Close()
	}
	if cfg == nil {
		rel, err := os.ReadFile(r.path("/proc/sys/kernel/osrelease"))
		if err != nil {
			return "?"
		}
		cfg, err = os.ReadFile(r.path("/boot/config-" + string(bytes.TrimSpace(rel))))
		if err != nil {
			return "?"
		}
	}
	for line := range strings.Lines(string(cfg)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "CONFIG_RT_GROUP_SCHED="); ok {
			return v
		}
	}
	return ""
}
