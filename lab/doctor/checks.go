package doctor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/gowq/wq/internal/labsys"
)

// Capability bits (linux/capability.h).
const (
	capIPCLock  = 14
	capSysAdmin = 21
	capSysNice  = 23
)

// unlimited is how procfs reports "unlimited" in /proc/<pid>/limits.
const unlimited = math.MaxUint64

// Thresholds behind the judgements (documented in each check's Why).
const (
	// idleWarnUs: an idle state whose exit latency is above this adds
	// more to a wake-up than an RT worker's whole p50 on an idle machine.
	idleWarnUs = 20
	// stealWarnPct: more steal than this is a vCPU the hypervisor takes
	// away often enough to show in p99.
	stealWarnPct = 1.0
	// slackDefaultNs is the kernel's default timer slack.
	slackDefaultNs = 50_000
	// pmQoSDefault is PM_QOS_CPU_LATENCY_DEFAULT_VALUE: no request held.
	pmQoSDefault = 2_000_000_000
)

// machine holds the readings several checks share, each made once.
type machine struct {
	env *Env

	statusErr error
	status    procfs.ProcStatus
	statusRaw string
	limitsErr error
	limits    procfs.ProcLimits

	blockers []labsys.ClassBlocker
	claimed  map[int]bool

	isolated labsys.CPUSet // isolated CPUs (cmdline or sysfs), filled by checkIsolation
	allowed  labsys.CPUSet // the process's CPUs, filled by checkAffinity
	idleMax  int           // deepest enabled idle state's exit latency, us; -1 when no cpuidle

	qosDone bool
	qos     int32 // the PM QoS CPU latency limit, us (pmQoSDefault: none held)
	qosErr  error
}

// pmQoS reads the current CPU latency limit from /dev/cpu_dma_latency (a
// native-endian int32, in us). Opening the device adds a request at the
// default value, which constrains nothing, and closing drops it.
func (m *machine) pmQoS() (int32, error) {
	if m.qosDone {
		return m.qos, m.qosErr
	}
	m.qosDone = true
	f, err := os.Open(m.env.path("/dev/cpu_dma_latency"))
	if err != nil {
		m.qosErr = err
		return 0, err
	}
	defer f.Close()
	m.qosErr = binary.Read(f, binary.NativeEndian, &m.qos)
	return m.qos, m.qosErr
}

func newMachine(env *Env) *machine {
	m := &machine{env: env, claimed: map[int]bool{}, idleMax: -1}
	fsys, err := procfs.NewFS(env.path("/proc"))
	if err == nil {
		var p procfs.Proc
		if p, err = fsys.Proc(env.pid()); err == nil {
			m.status, m.statusErr = p.NewStatus()
			m.limits, m.limitsErr = p.Limits()
		}
	}
	if err != nil {
		m.statusErr, m.limitsErr = err, err
	}
	if b, err := os.ReadFile(env.path(fmt.Sprintf("/proc/%d/status", env.pid()))); err == nil {
		m.statusRaw = string(b)
	}
	// The class diagnosis is shared with the library's errors. Until it
	// is filled in (a stub returning nil) the checks below decide from
	// their own readings alone; they are kept thin for that reason.
	seen := map[labsys.ClassBlocker]bool{}
	for _, a := range []labsys.ThreadAttr{{Policy: labsys.ThreadFIFO, Priority: 1}, {Policy: labsys.ThreadNormal, Nice: -20}} {
		for _, b := range env.Diagnose(a) {
			if !seen[b] {
				seen[b] = true
				m.blockers = append(m.blockers, b)
			}
		}
	}
	return m
}

func (m *machine) all() []func() Check {
	return []func() Check{
		m.checkCapSysNice, m.checkRTPrio, m.checkNice, m.checkMemlock, m.checkCgroupRT, m.checkSeccomp,
		m.checkRTThrottle, m.checkIsolation, m.checkAffinity, m.checkGOMAXPROCS, m.checkGovernor, m.checkIdle, m.checkPMQoS,
		m.checkSteal, m.checkTimerSlack, m.checkTHP, m.checkIRQBalance, m.checkIRQAffinity, m.checkTracefs,
	}
}

// claim folds the blockers DiagnoseClass reported under cause into c: the
// check FAILs, shows the blocker's detail and gives its fix.
func (m *machine) claim(c Check, cause string) Check {
	first := true
	for i, b := range m.blockers {
		if b.Cause != cause {
			continue
		}
		m.claimed[i] = true
		c.Status = Fail
		// The first blocker (the RT class is diagnosed before nice -20)
		// gives the detail and the remedy; later ones for the same cause
		// repeat it.
		if !first {
			continue
		}
		first = false
		if b.Detail != "" && !strings.Contains(c.Value, b.Detail) {
			c.Value += "; " + b.Detail
		}
		if b.Fix != "" {
			c.Remedy = b.Fix
		}
	}
	return c
}

func (m *machine) unclaimed() []labsys.ClassBlocker {
	var out []labsys.ClassBlocker
	for i, b := range m.blockers {
		if !m.claimed[i] {
			out = append(out, b)
		}
	}
	return out
}

func (m *machine) hasCap(bit uint) bool { return m.statusErr == nil && m.status.CapEff&(1<<bit) != 0 }

func (m *machine) read(p string) (string, error) {
	b, err := os.ReadFile(m.env.path(p))
	return strings.TrimSpace(string(b)), err
}

// unreadable is the WARN for a file that exists but could not be read.
func unreadable(c Check, err error) Check {
	c.Status = Warn
	if errors.Is(err, fs.ErrPermission) {
		c.Value = "cannot read: permission denied"
		c.Remedy = "run `wqlab doctor` as root to read it"
		return c
	}
	c.Value = "cannot read"
	c.Error = err.Error()
	c.Remedy = "check that /proc and /sys are mounted and readable"
	return c
}

func (m *machine) checkCapSysNice() Check {
	c := Check{ID: "cap-sys-nice", Name: "CAP_SYS_NICE",
		Why: "lets worker threads switch to SCHED_FIFO (RT class) and nice -20 (highpri class) whatever the rlimits say; without it only RLIMIT_RTPRIO/RLIMIT_NICE can grant them"}
	switch {
	case m.statusErr != nil:
		return unreadable(c, m.statusErr)
	case m.hasCap(capSysNice):
		c.Status, c.Value = OK, "held (effective set)"
	default:
		c.Status, c.Value = Warn, fmt.Sprintf("not held (CapEff %016x)", m.status.CapEff)
		c.Remedy = "run as root, or `setcap cap_sys_nice+ep <binary>`, or systemd AmbientCapabilities=CAP_SYS_NICE, or docker/podman --cap-add SYS_NICE"
	}
	return m.claim(c, "CAP_SYS_NICE")
}

func limitString(cur uint64) string {
	if cur == unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(cur, 10)
}

func (m *machine) checkRTPrio() Check {
	c := Check{ID: "rlimit-rtprio", Name: "RLIMIT_RTPRIO",
		Why: "without CAP_SYS_NICE, the highest SCHED_FIFO priority a thread may take; gowq's RT workers need at least 1 (wq.RTPriority()), else wq.Alloc of an RT queue returns ErrPermission and the lab's RT rows are skipped"}
	if m.limitsErr != nil {
		return unreadable(c, m.limitsErr)
	}
	cur := m.limits.RealtimePriority
	c.Value = limitString(cur)
	switch {
	case m.hasCap(capSysNice):
		c.Status, c.Value = OK, c.Value+" (not consulted: CAP_SYS_NICE held)"
	case cur >= 1:
		c.Status = OK
	default:
		c.Status = Fail
		c.Remedy = "grant CAP_SYS_NICE (see above) or raise the limit: `ulimit -r 99` before starting, `prlimit --rtprio=99 --pid PID`, rtprio in /etc/security/limits.conf, systemd LimitRTPRIO=99, docker --ulimit rtprio=99"
	}
	return m.claim(c, "RLIMIT_RTPRIO")
}

func (m *machine) checkNice() Check {
	c := Check{ID: "rlimit-nice", Name: "RLIMIT_NICE",
		Why: "without CAP_SYS_NICE, how far a thread may lower its nice (ceiling 20 - limit); the highpri class and the lab's nice -20 hogs need 40"}
	if m.limitsErr != nil {
		return unreadable(c, m.limitsErr)
	}
	cur := m.limits.NicePriority
	c.Value = limitString(cur)
	switch {
	case m.hasCap(capSysNice):
		c.Status, c.Value = OK, c.Value+" (not consulted: CAP_SYS_NICE held)"
	case cur >= 40:
		c.Status = OK
	default:
		c.Status = Warn
		c.Value += fmt.Sprintf(" (lowest nice reachable: %d)", 20-int(min(cur, 40)))
		c.Remedy = "grant CAP_SYS_NICE or raise the limit: `ulimit -e 40`, `prlimit --nice=40 --pid PID`, nice in /etc/security/limits.conf, systemd LimitNICE=-20, docker --ulimit nice=40"
	}
	return m.claim(c, "RLIMIT_NICE")
}

func (m *machine) checkMemlock() Check {
	c := Check{ID: "rlimit-memlock", Name: "RLIMIT_MEMLOCK",
		Why: "an RT worker that takes a page fault (first touch, reclaimed page) waits for memory management; locking memory (mlockall) avoids it and needs this limit unlimited or CAP_IPC_LOCK"}
	if m.limitsErr != nil {
		return unreadable(c, m.limitsErr)
	}
	cur := m.limits.LockedMemory
	c.Value = limitString(cur)
	if cur != unlimited {
		c.Value += " bytes"
	}
	switch {
	case cur == unlimited:
		c.Status = OK
	case m.hasCap(capIPCLock):
		c.Status, c.Value = OK, c.Value+" (not consulted: CAP_IPC_LOCK held)"
	default:
		c.Status = Warn
		c.Remedy = "`ulimit -l unlimited` before starting, memlock in /etc/security/limits.conf, systemd LimitMEMLOCK=infinity, docker --ulimit memlock=-1, or grant CAP_IPC_LOCK"
	}
	return c
}

// cgroupDir returns the directory, under Root, of this process's cgroup in
// the hierarchy that has file (cgroup v1 controller ctl, or v2), and the
// cgroup path as the process sees it; "" when none has the file.
func (m *machine) cgroupDir(ctl, file string) (dir, cg string, err error) {
	b, err := os.ReadFile(m.env.path(fmt.Sprintf("/proc/%d/cgroup", m.env.pid())))
	if err != nil {
		return "", "", err
	}
	fsys, err := procfs.NewFS(m.env.path("/proc"))
	if err != nil {
		return "", "", err
	}
	p, err := fsys.Proc(m.env.pid())
	if err != nil {
		return "", "", err
	}
	mounts, err := p.MountInfo()
	if err != nil {
		return "", "", err
	}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		v2 := f[0] == "0" && f[1] == ""
		if !v2 && !slices.Contains(strings.Split(f[1], ","), ctl) {
			continue
		}
		for _, mi := range mounts {
			if v2 && mi.FSType != "cgroup2" {
				continue
			}
			if _, ok := mi.SuperOptions[ctl]; !v2 && (mi.FSType != "cgroup" || !ok) {
				continue
			}
			rel, ok := strings.CutPrefix(path.Clean(f[2]), path.Clean(mi.Root))
			if !ok {
				continue
			}
			d := filepath.Join(m.env.path(mi.MountPoint), rel)
			if _, err := os.Stat(filepath.Join(d, file)); err == nil {
				return d, f[2], nil
			}
		}
	}
	return "", "", nil
}

func (m *machine) checkCgroupRT() Check {
	c := Check{ID: "cgroup-rt-budget", Name: "cgroup RT budget",
		Why: "with RT group scheduling (cgroup v1 cpu controller, CONFIG_RT_GROUP_SCHED) the process's cgroup must have cpu.rt_runtime_us > 0: at 0, the default of a new group (Docker on cgroup v1), sched_setattr(SCHED_FIFO) fails with EPERM even as root"}
	dir, cg, err := m.cgroupDir("cpu", "cpu.rt_runtime_us")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unreadable(c, err)
	}
	if dir == "" {
		c.Status, c.Value = OK, "not applicable: no cpu.rt_runtime_us for this cgroup (cgroup v2 or no RT group scheduling); only kernel.sched_rt_runtime_us applies"
		return m.claim(c, "cgroup cpu.rt_runtime_us")
	}
	rt, err := m.readInt(filepath.Join(dir, "cpu.rt_runtime_us"))
	if err != nil {
		return unreadable(c, err)
	}
	per, _ := m.readInt(filepath.Join(dir, "cpu.rt_period_us"))
	c.Value = fmt.Sprintf("cgroup %s: cpu.rt_runtime_us %d of cpu.rt_period_us %d", cg, rt, per)
	if rt == 0 {
		c.Status = Fail
		c.Remedy = fmt.Sprintf("give the group an RT budget (echo 950000 > %s, after its parents have one), docker --cpu-rt-runtime=950000 (with --cap-add SYS_NICE), or run the process in a group that has one",
			strings.TrimPrefix(filepath.Join(dir, "cpu.rt_runtime_us"), m.env.Root))
	} else {
		c.Status = OK
	}
	return m.claim(c, "cgroup cpu.rt_runtime_us")
}

func (m *machine) readInt(absPath string) (int64, error) {
	b, err := os.ReadFile(absPath)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func (m *machine) checkSeccomp() Check {
	c := Check{ID: "seccomp", Name: "seccomp",
		Why: "a seccomp filter (container runtimes install one) may refuse sched_setattr or sched_setaffinity, and the RT class with them"}
	mode := ""
	for line := range strings.Lines(m.statusRaw) {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			mode = strings.TrimSpace(v)
		}
	}
	switch mode {
	case "", "0":
		c.Status, c.Value = OK, "none"
		if mode == "" {
			c.Value = "not applicable: no Seccomp line in /proc/PID/status"
		}
	case "1":
		c.Status, c.Value = Fail, "strict mode (only read, write, exit, sigreturn)"
		c.Remedy = "run wqlab outside the strict-mode sandbox"
	default:
		c.Status, c.Value = Warn, "filter mode (a filter is installed; /proc cannot tell whether it allows sched_setattr)"
		c.Remedy = "if RT workers fail with EPERM: allow sched_setattr, sched_setscheduler and sched_setaffinity in the profile (docker/podman --security-opt seccomp=PROFILE); `wqlab wake` shows whether the RT class works"
	}
	return m.claim(c, "seccomp")
}

func (m *machine) checkRTThrottle() Check {
	c := Check{ID: "rt-throttle", Name: "kernel.sched_rt_runtime_us",
		Why: "RT throttling: RT threads together may run sched_rt_runtime_us of every sched_rt_period_us on a CPU; a runaway RT work item is then stopped for the rest of the period so that SCHED_OTHER threads (kworkers, RCU, your shell) still run; at -1 it is never stopped"}
	rtS, err1 := m.read("/proc/sys/kernel/sched_rt_runtime_us")
	perS, err2 := m.read("/proc/sys/kernel/sched_rt_period_us")
	if errors.Is(err1, fs.ErrNotExist) {
		c.Status, c.Value = Warn, "not applicable: /proc/sys/kernel/sched_rt_runtime_us is absent (no /proc/sys in this container?)"
		c.Remedy = "read it on the host: sysctl kernel.sched_rt_runtime_us kernel.sched_rt_period_us"
		return m.claim(c, "sched_rt_runtime_us")
	}
	if err := errors.Join(err1, err2); err != nil {
		return unreadable(c, err)
	}
	rt, err1 := strconv.ParseInt(rtS, 10, 64)
	per, err2 := strconv.ParseInt(perS, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return unreadable(c, err)
	}
	c.Value = fmt.Sprintf("%d of %d us", rt, per)
	switch {
	case rt < 0:
		c.Status = Warn
		c.Value += " (no throttling)"
		c.Why += ": an RT work item that never sleeps locks its CPU for good (per-CPU kworkers and RCU there stall, the watchdog fires)"
		c.Remedy = "sysctl kernel.sched_rt_runtime_us=950000 (the default), unless every RT item is known to be short"
	case rt == 0:
		c.Status = Fail
		c.Value += " (RT threads get no CPU time)"
		c.Remedy = "sysctl kernel.sched_rt_runtime_us=950000"
	case per > 0 && rt >= per:
		c.Status = Warn
		c.Value += " (budget covers the whole period: no throttling in effect)"
		c.Remedy = "sysctl kernel.sched_rt_runtime_us=950000"
	case per > 0 && rt*2 < per:
		c.Status = Warn
		c.Value += fmt.Sprintf(" (RT threads are stopped for %d us of every period once they used their budget)", per-rt)
		c.Remedy = "sysctl kernel.sched_rt_runtime_us=950000, so that busy RT workers are not stopped for long"
	default:
		c.Status = OK
		c.Value += fmt.Sprintf(" (a runaway RT item is stopped after %d ms of each %d ms)", rt/1000, per/1000)
	}
	return m.claim(c, "sched_rt_runtime_us")
}

// cmdlineParam returns the value of kernel parameter name, "" when absent.
func cmdlineParam(cmdline, name string) (string, bool) {
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break // the rest is for init
		}
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// cpuListOfParam parses an isolcpus= value, whose list may follow flags
// ("managed_irq,domain,1-3").
func cpuListOfParam(v string) labsys.CPUSet {
	var keep []string
	for _, p := range strings.Split(v, ",") {
		if p != "" && (p[0] >= '0' && p[0] <= '9') {
			keep = append(keep, p)
		}
	}
	s, _ := labsys.ParseCPUList(strings.Join(keep, ","))
	return s
}

func (m *machine) checkIsolation() Check {
	c := Check{ID: "cpu-isolation", Name: "CPU isolation",
		Why: "RT workers on CPUs that no other task, timer tick (nohz_full) or RCU callback (rcu_nocbs) uses start items without sharing the CPU; on shared CPUs SCHED_FIFO still preempts ordinary tasks, but IRQs, softirqs and kernel threads add jitter"}
	cmdline, err := m.read("/proc/cmdline")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unreadable(c, err)
	}
	var parts []string
	for _, name := range []string{"isolcpus", "nohz_full", "rcu_nocbs"} {
		v, ok := cmdlineParam(cmdline, name)
		if ok {
			parts = append(parts, name+"="+v)
		}
		if name == "isolcpus" && ok {
			m.isolated = m.isolated.Or(cpuListOfParam(v))
		}
	}
	for _, f := range []string{"isolated", "nohz_full"} {
		v, err := m.read("/sys/devices/system/cpu/" + f)
		if err != nil || v == "" || v == "(null)" {
			continue
		}
		if s, err := labsys.ParseCPUList(v); err == nil {
			m.isolated = m.isolated.Or(s)
			parts = append(parts, "sysfs "+f+" "+v)
		}
	}
	if m.isolated.IsEmpty() {
		c.Status, c.Value = Warn, "none (no isolcpus, nohz_full or rcu_nocbs)"
		c.Remedy = "for the lowest jitter, boot with isolcpus=managed_irq,domain,N-M nohz_full=N-M rcu_nocbs=N-M (tuned's realtime profile does this) and run the RT queues there (wq cpumask, taskset, systemd CPUAffinity=)"
		return c
	}
	c.Status, c.Value = OK, "isolated CPUs "+m.isolated.String()+" ("+strings.Join(parts, "; ")+")"
	return c
}

func (m *machine) checkAffinity() Check {
	c := Check{ID: "cpu-affinity", Name: "process CPUs",
		Why: "gowq's per-CPU pools and the lab's load run on the CPUs this process may use (its affinity, narrowed by its cpuset); isolated CPUs help only if RT queues run there"}
	if m.statusErr != nil {
		return unreadable(c, m.statusErr)
	}
	var ids []int
	for _, u := range m.status.CpusAllowedList {
		ids = append(ids, int(u))
	}
	m.allowed = labsys.NewCPUSet(ids...)
	online, _ := m.read("/sys/devices/system/cpu/online")
	c.Value = "CPUs " + m.allowed.String()
	if online != "" {
		c.Value += " of " + online + " online"
	}
	switch {
	case m.allowed.Len() == 1:
		c.Status = Warn
		c.Value += " (one CPU: the RT worker, the queueing thread and the Go runtime share it)"
		c.Remedy = "allow at least two CPUs (taskset -c, systemd CPUAffinity=, docker --cpuset-cpus, Kubernetes CPU manager static policy with 2+ CPUs)"
	case !m.isolated.IsEmpty() && m.allowed.And(m.isolated).IsEmpty():
		c.Status = Warn
		c.Value += " (none of the isolated CPUs " + m.isolated.String() + ")"
		c.Remedy = "run the process on the isolated CPUs for its RT queues: taskset -c " + m.isolated.String() + ", systemd CPUAffinity=, docker --cpuset-cpus"
	default:
		c.Status = OK
	}
	return c
}

func (m *machine) glob(pattern string) []string {
	g, _ := filepath.Glob(m.env.path(pattern))
	return g
}

func cpuOf(p string) string {
	for _, seg := range strings.Split(p, string(filepath.Separator)) {
		if strings.HasPrefix(seg, "cpu") && len(seg) > 3 && seg[3] >= '0' && seg[3] <= '9' {
			return seg[3:]
		}
	}
	return "?"
}

func (m *machine) checkGovernor() Check {
	c := Check{ID: "cpufreq-governor", Name: "cpufreq governor",
		Why: "a governor other than performance lets an idle CPU run slow and ramps up only after load appears, so the first items after a quiet spell start and run slower"}
	files := m.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")
	if len(files) == 0 {
		c.Status, c.Value = OK, "not applicable: no cpufreq (a VM, a container, or fixed frequency: the host or firmware decides)"
		return c
	}
	byGov := map[string][]string{}
	var govs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return unreadable(c, err)
		}
		g := strings.TrimSpace(string(b))
		if _, ok := byGov[g]; !ok {
			govs = append(govs, g)
		}
		byGov[g] = append(byGov[g], cpuOf(f))
	}
	slices.Sort(govs)
	var parts []string
	for _, g := range govs {
		parts = append(parts, fmt.Sprintf("%s on CPU %s", g, strings.Join(byGov[g], ",")))
	}
	c.Value = strings.Join(parts, "; ")
	if len(govs) == 1 && govs[0] == "performance" {
		c.Status = OK
		return c
	}
	c.Status = Warn
	c.Remedy = "cpupower frequency-set -g performance (or: for f in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > $f; done; tuned-adm profile realtime)"
	return c
}

func (m *machine) checkIdle() Check {
	c := Check{ID: "cpuidle", Name: "cpuidle states",
		Why: fmt.Sprintf("a CPU in a deep idle state needs its exit latency before the woken worker runs: an idle machine's RT wake-up pays it every time (WARN above %d us)", idleWarnUs)}
	dirs := m.glob("/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*")
	if len(dirs) == 0 {
		c.Status, c.Value = OK, "not applicable: no cpuidle states (a VM or idle=poll: the CPU does not enter deep states the kernel controls)"
		return c
	}
	type st struct {
		lat      int
		disabled bool
	}
	states := map[string]st{} // "name" -> deepest seen
	var names []string
	for _, d := range dirs {
		name, err := os.ReadFile(filepath.Join(d, "name"))
		if err != nil {
			return unreadable(c, err)
		}
		lat, err := m.readInt(filepath.Join(d, "latency"))
		if err != nil {
			return unreadable(c, err)
		}
		dis, _ := m.readInt(filepath.Join(d, "disable"))
		n := strings.TrimSpace(string(name))
		if _, ok := states[n]; !ok {
			names = append(names, n)
		}
		s := states[n]
		s.lat = max(s.lat, int(lat))
		s.disabled = s.disabled || dis != 0
		states[n] = s
		if dis == 0 {
			m.idleMax = max(m.idleMax, int(lat))
		}
	}
	var parts []string
	for _, n := range names {
		p := fmt.Sprintf("%s %d us", n, states[n].lat)
		if states[n].disabled {
			p += " (disabled)"
		}
		parts = append(parts, p)
	}
	c.Value = strings.Join(parts, ", ")
	if m.idleMax > idleWarnUs {
		c.Value += fmt.Sprintf("; deepest enabled exit latency %d us", m.idleMax)
		if q, err := m.pmQoS(); err == nil && q <= idleWarnUs {
			c.Status = OK
			c.Value += fmt.Sprintf(", kept out by a PM QoS request of %d us", q)
			return c
		}
		c.Status = Warn
		c.Remedy = fmt.Sprintf("hold a PM QoS request (keep /dev/cpu_dma_latency open with a value <= %d, as cyclictest and tuned do), or disable the deep states (echo 1 > /sys/devices/system/cpu/cpu*/cpuidle/stateN/disable), or boot with processor.max_cstate=1 intel_idle.max_cstate=1", idleWarnUs)
		return c
	}
	c.Status = OK
	return c
}

func (m *machine) checkPMQoS() Check {
	c := Check{ID: "pm-qos", Name: "PM QoS (/dev/cpu_dma_latency)",
		Why: "while some process holds /dev/cpu_dma_latency open with a small value, cpuidle keeps CPUs out of states slower to leave than that value, which removes the idle exit latency from wake-ups"}
	v, err := m.pmQoS()
	if errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Value = OK, "not applicable: no /dev/cpu_dma_latency (a container without the device, or a kernel without PM QoS)"
		return c
	}
	if err != nil {
		return unreadable(c, err)
	}
	if v < pmQoSDefault {
		c.Status, c.Value = OK, fmt.Sprintf("held: CPUs stay in idle states that exit within %d us", v)
		return c
	}
	c.Value = "no request held"
	if m.idleMax > idleWarnUs {
		c.Status = Warn
		c.Value += fmt.Sprintf(" (deepest enabled idle state exits in %d us)", m.idleMax)
		c.Remedy = "keep /dev/cpu_dma_latency open with the latency you need written to it as a 32-bit integer (e.g. tuned's realtime profile, or a small daemon: exec 3>/dev/cpu_dma_latency; printf '\\x0a\\x00\\x00\\x00' >&3; sleep infinity)"
		return c
	}
	c.Status = OK
	c.Value += " (not needed: no idle state slower than " + strconv.Itoa(idleWarnUs) + " us)"
	return c
}

func (m *machine) checkSteal() Check {
	c := Check{ID: "steal", Name: "steal time",
		Why: fmt.Sprintf("steal is time the hypervisor ran something else while this VM's vCPU wanted to run; a stolen vCPU starts nothing, whatever the class (WARN above %.0f%%)", stealWarnPct)}
	fsys, err := procfs.NewFS(m.env.path("/proc"))
	if err != nil {
		return unreadable(c, err)
	}
	s1, err := fsys.Stat()
	if err != nil {
		return unreadable(c, err)
	}
	m.env.Sleep(StealInterval)
	s2, err := fsys.Stat()
	if err != nil {
		return unreadable(c, err)
	}
	total := func(s procfs.CPUStat) float64 {
		return s.User + s.Nice + s.System + s.Idle + s.Iowait + s.IRQ + s.SoftIRQ + s.Steal
	}
	dt := total(s2.CPUTotal) - total(s1.CPUTotal)
	ds := s2.CPUTotal.Steal - s1.CPUTotal.Steal
	pct := 0.0
	if dt > 0 {
		pct = 100 * ds / dt
	}
	c.Value = fmt.Sprintf("%.1f%% over %v (%.0f%% since boot)", pct, StealInterval, 100*s2.CPUTotal.Steal/max(total(s2.CPUTotal), 1e-9))
	if pct > stealWarnPct {
		c.Status = Warn
		c.Remedy = "run on dedicated (pinned, not overcommitted) vCPUs or bare metal; ask the provider for dedicated hosts"
		return c
	}
	c.Status = OK
	return c
}

func (m *machine) checkTimerSlack() Check {
	c := Check{ID: "timer-slack", Name: "timer slack",
		Why: fmt.Sprintf("the kernel may fire a SCHED_OTHER thread's timed sleeps up to the slack late to batch wake-ups; delayed work and timed waits of normal workers inherit it (RT threads get none); default %d ns", slackDefaultNs)}
	ns, err := m.env.TimerSlack()
	if err != nil {
		return unreadable(c, err)
	}
	c.Value = fmt.Sprintf("%d ns", ns)
	if ns > slackDefaultNs {
		c.Status = Warn
		c.Remedy = "lower it: systemd TimerSlackNSec=50us (or 1ns), or prctl(PR_SET_TIMERSLACK, 1) at start; check the parent process that set it"
		return c
	}
	c.Status = OK
	return c
}

// bracketed returns the [selected] word of a sysfs choice file.
func bracketed(s string) string {
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return s
	}
	return s[i+1 : j]
}

func (m *machine) checkTHP() Check {
	c := Check{ID: "thp", Name: "transparent huge pages",
		Why: "with enabled=always and defrag=always a page fault may compact memory synchronously (milliseconds) in whatever thread touched the page, RT workers included; madvise or defer keeps compaction out of the fault path"}
	en, err := m.read("/sys/kernel/mm/transparent_hugepage/enabled")
	if errors.Is(err, fs.ErrNotExist) {
		c.Status, c.Value = OK, "not applicable: no transparent huge pages in this kernel"
		return c
	}
	if err != nil {
		return unreadable(c, err)
	}
	df, err := m.read("/sys/kernel/mm/transparent_hugepage/defrag")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unreadable(c, err)
	}
	e, d := bracketed(en), bracketed(df)
	c.Value = "enabled=" + e + " defrag=" + d
	if e == "always" && d == "always" {
		c.Status = Warn
		c.Remedy = "echo madvise > /sys/kernel/mm/transparent_hugepage/defrag (or enabled), or boot with transparent_hugepage=madvise"
		return c
	}
	c.Status = OK
	return c
}

// irqbalancePID returns the pid of a running irqbalance, 0 when none.
func (m *machine) irqbalancePID() int {
	for _, f := range m.glob("/proc/[0-9]*/comm") {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == "irqbalance" {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			return n
		}
	}
	return 0
}

func (m *machine) checkIRQBalance() Check {
	c := Check{ID: "irqbalance", Name: "irqbalance",
		Why: "irqbalance moves device interrupts between CPUs at run time, also onto the CPUs RT queues use; an interrupt and its softirq run ahead of any thread, SCHED_FIFO included"}
	if pid := m.irqbalancePID(); pid != 0 {
		c.Status, c.Value = Warn, fmt.Sprintf("running (pid %d)", pid)
		c.Remedy = "keep it off the RT CPUs (IRQBALANCE_BANNED_CPULIST=N-M in /etc/default/irqbalance; recent versions also skip isolcpus/nohz_full CPUs) or stop it (systemctl disable --now irqbalance) and set /proc/irq/*/smp_affinity_list yourself"
		return c
	}
	c.Status, c.Value = OK, "not running"
	return c
}

func (m *machine) checkIRQAffinity() Check {
	c := Check{ID: "irq-affinity", Name: "IRQ affinity",
		Why: "interrupts routed to a CPU where an RT worker waits delay its start by the handler and softirq time; on isolated CPUs there should be none"}
	dirs := m.glob("/proc/irq/[0-9]*")
	if len(dirs) == 0 {
		c.Status, c.Value = OK, "not applicable: /proc/irq is absent or empty (a container)"
		return c
	}
	target := m.isolated.And(m.allowed)
	if m.isolated.IsEmpty() {
		target = m.allowed
	}
	var hit []int
	read := 0
	for _, d := range dirs {
		v, err := os.ReadFile(filepath.Join(d, "effective_affinity_list"))
		if err != nil {
			v, err = os.ReadFile(filepath.Join(d, "smp_affinity_list"))
		}
		if err != nil {
			continue // an IRQ without affinity files (e.g. irq 0)
		}
		s, err := labsys.ParseCPUList(strings.TrimSpace(string(v)))
		if err != nil {
			continue
		}
		read++
		if !s.And(target).IsEmpty() {
			n, _ := strconv.Atoi(filepath.Base(d))
			hit = append(hit, n)
		}
	}
	slices.Sort(hit)
	list := func() string {
		var ss []string
		for i, n := range hit {
			if i == 8 {
				ss = append(ss, fmt.Sprintf("... (%d more)", len(hit)-8))
				break
			}
			ss = append(ss, strconv.Itoa(n))
		}
		return strings.Join(ss, " ")
	}
	if m.isolated.IsEmpty() || target.IsEmpty() {
		c.Status = OK
		c.Value = fmt.Sprintf("%d of %d IRQs may fire on this process's CPUs %s (no isolated CPUs to keep them off)", len(hit), read, m.allowed.String())
		return c
	}
	if len(hit) == 0 {
		c.Status, c.Value = OK, fmt.Sprintf("none of %d IRQs on the isolated CPUs %s", read, target.String())
		return c
	}
	c.Status = Warn
	c.Value = fmt.Sprintf("%d of %d IRQs may fire on the isolated CPUs %s: %s", len(hit), read, target.String(), list())
	c.Remedy = "move them to the housekeeping CPUs: echo H > /proc/irq/N/smp_affinity_list for each, or boot with irqaffinity=H and isolcpus=managed_irq,..."
	return c
}

func (m *machine) checkTracefs() Check {
	c := Check{ID: "tracefs", Name: "tracefs",
		Why: "`wqlab trace --live` and `wqlab --kernel` read the kernel's workqueue tracepoints from tracefs to compare gowq with the kernel's own kworkers; nothing else needs it"}
	var lastErr error
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		_, err := os.Stat(m.env.path(dir + "/events/workqueue/workqueue_queue_work"))
		if err == nil {
			c.Status, c.Value = OK, "workqueue events available at "+dir
			return c
		}
		if errors.Is(err, fs.ErrPermission) {
			lastErr = err
		}
	}
	if lastErr != nil {
		c.Status, c.Value = Warn, "tracefs is root-only here (permission denied)"
		c.Remedy = "run `wqlab trace --live` as root (or with CAP_SYS_ADMIN and access to /sys/kernel/tracing)"
		return c
	}
	fss, _ := m.read("/proc/filesystems")
	if strings.Contains(fss, "\ttracefs") {
		c.Value = "supported, not mounted"
		if m.hasCap(capSysAdmin) {
			c.Status = OK
			c.Value += " (`wqlab trace --live` mounts it at /sys/kernel/tracing)"
			return c
		}
		c.Status = Warn
		c.Remedy = "mount -t tracefs nodev /sys/kernel/tracing as root, or run `wqlab trace --live` as root (it mounts it)"
		return c
	}
	c.Status, c.Value = Warn, "not available (no tracefs in this kernel, or no workqueue events)"
	c.Remedy = "use a kernel with CONFIG_FTRACE and the workqueue tracepoints; `wqlab trace FILE` still analyses captures made elsewhere"
	return c
}
