package sched

// Thread limits: what makes clone(2) refuse one more thread of this process.
//
// The Go runtime cannot survive a failed thread creation: when clone fails
// (EAGAIN) it prints "runtime: failed to create new OS thread" and aborts
// the whole process. Code that creates threads on demand (gowq's workers)
// must therefore stop short of every limit and treat the creation as
// failed instead. The limits, all checked by the kernel in copy_process()
// and alloc_pid():
//
//   - pids.max of the process's pids cgroup and of each of its ancestors
//     (cgroup v1 "pids" controller or v2 unified hierarchy): pids.current
//     counts every task (thread) in the cgroup and its descendants, and a
//     clone that would take any level above its pids.max fails. Root is not
//     exempt.
//   - RLIMIT_NPROC: counts every task whose real uid is the caller's, in
//     all processes of that user. The kernel ignores it for the root user
//     of the initial user namespace and for a caller with CAP_SYS_RESOURCE
//     or CAP_SYS_ADMIN (copy_process: "p->real_cred->user != INIT_USER &&
//     !capable(CAP_SYS_RESOURCE) && !capable(CAP_SYS_ADMIN)").
//     Counting the user's tasks exactly would mean reading every
//     /proc/<pid>/status; this package counts only this process's threads,
//     a lower bound, so the headroom it reports for RLIMIT_NPROC is an upper
//     bound when the same user runs other processes.
//   - kernel.threads-max and kernel.pid_max, system-wide, against the
//     number of tasks in the system (the second count in /proc/loadavg).
//
// Reading costs a few small file reads and one getrlimit; the location of
// the pids cgroup is found once and again only when /proc/self/cgroup
// changes (the process was moved).

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// ThreadMargin is how many threads below every thread limit the creators of
// worker threads stop: the Go runtime creates threads of its own at any
// time (one per P running Go code, one for each goroutine blocked in a
// system call or cgo call, sysmon, the template thread) and aborts the
// process when one of those creations fails, so gowq leaves it this many.
// 8 covers GOMAXPROCS up to a few plus a few blocked system calls; a
// program that blocks many goroutines in system calls at once needs more
// room than gowq can see.
const ThreadMargin = 8

// ThreadLimit is one limit on the number of threads (tasks) this process
// may create and the count the kernel checks against it.
type ThreadLimit struct {
	// Name is "pids.max", "RLIMIT_NPROC", "kernel.threads-max" or
	// "kernel.pid_max".
	Name string
	// Path is the cgroup directory whose pids.max this is; "" otherwise.
	Path string
	// Max is the limit.
	Max int
	// Current is the number of tasks counted against Max: pids.current of
	// the cgroup, this process's threads for RLIMIT_NPROC (a lower bound
	// of the user's tasks), all tasks of the system for the kernel limits.
	Current int
}

// Headroom is how many more threads the limit allows (Max - Current); it
// can be negative (a process moved into a full cgroup).
func (l ThreadLimit) Headroom() int { return l.Max - l.Current }

// String describes the limit and its count, e.g. "pids.max 24 of cgroup
// /sys/fs/cgroup/pids/job (pids.current 20)".
func (l ThreadLimit) String() string {
	switch l.Name {
	case "pids.max":
		return fmt.Sprintf("pids.max %d of cgroup %s (pids.current %d)", l.Max, l.Path, l.Current)
	case "RLIMIT_NPROC":
		return fmt.Sprintf("RLIMIT_NPROC %d of uid %d (this process has %d threads; other processes of the user count too)", l.Max, os.Getuid(), l.Current)
	}
	return fmt.Sprintf("%s %d (%d tasks in the system)", l.Name, l.Max, l.Current)
}

// Fix says how to raise the limit.
func (l ThreadLimit) Fix() string {
	switch l.Name {
	case "pids.max":
		return fmt.Sprintf("raise it (echo N > %s; docker/podman --pids-limit, systemd TasksMax=) or create fewer threads (fewer workqueues, lower max_active)",
			filepath.Join(l.Path, "pids.max"))
	case "RLIMIT_NPROC":
		return "raise it (`ulimit -u N` before starting, `prlimit --nproc=N --pid PID`, nproc in /etc/security/limits.conf, systemd LimitNPROC=) or create fewer threads"
	case "kernel.threads-max":
		return "raise it (sysctl kernel.threads-max=N) or run fewer threads on the system"
	case "kernel.pid_max":
		return "raise it (sysctl kernel.pid_max=N) or run fewer tasks on the system"
	}
	return "raise it or create fewer threads"
}

// ThreadLimits returns every limit found on creating one more thread of
// this process (see the list at the top of limits.go); limits that do not
// apply (pids.max "max", RLIMIT_NPROC infinite or ignored for this
// process) are left out. It blocks for a few small file reads. An error
// means a file that exists could not be read or parsed; the limits read
// until then are returned with it.
func ThreadLimits() ([]ThreadLimit, error) { return defaultLimits.limits() }

// ThreadHeadroom returns how many more threads this process may create
// before the tightest limit (see ThreadLimits), and that limit. With no
// limit it returns math.MaxInt and a zero ThreadLimit. Callers keep
// ThreadMargin of it for the Go runtime. It blocks for a few small file
// reads; safe from any goroutine.
func ThreadHeadroom() (int, ThreadLimit, error) {
	ls, err := ThreadLimits()
	n, tight := tightest(ls)
	return n, tight, err
}

// tightest returns the smallest headroom in ls and its limit
// (math.MaxInt and a zero ThreadLimit for none).
func tightest(ls []ThreadLimit) (int, ThreadLimit) {
	n, tight := math.MaxInt, ThreadLimit{}
	for _, l := range ls {
		if h := l.Headroom(); h < n {
			n, tight = h, l
		}
	}
	return n, tight
}

// limitReader reads the limits from a /proc and /sys tree under root (""
// is the real one). The functions are injectable for tests.
type limitReader struct {
	root   string
	pid    int
	uid    func() int
	nproc  func() (uint64, error)
	exempt func() bool // RLIMIT_NPROC does not apply (root, CAP_SYS_RESOURCE, CAP_SYS_ADMIN)

	mu     sync.Mutex
	cgKey  string   // guarded by mu: content of /proc/self/cgroup when dirs was found
	cgDirs []string // guarded by mu: cgroup directories that have pids.max, innermost first
}

var defaultLimits = &limitReader{
	pid: os.Getpid(),
	uid: os.Getuid,
	nproc: func() (uint64, error) {
		var rl unix.Rlimit
		err := unix.Getrlimit(unix.RLIMIT_NPROC, &rl)
		return rl.Cur, err
	},
	exempt: nprocExempt,
}

func (r *limitReader) path(p string) string {
	if r.root == "" {
		return p
	}
	return filepath.Join(r.root, p)
}

func (r *limitReader) limits() ([]ThreadLimit, error) {
	var out []ThreadLimit
	var errs []error
	dirs, err := r.pidsDirs()
	if err != nil {
		errs = append(errs, err)
	}
	for _, d := range dirs {
		l, ok, err := readPids(d)
		if err != nil {
			errs = append(errs, err)
			r.forgetDirs() // moved or removed: look again next time
			continue
		}
		if ok {
			// Report the directory as the process sees it, without the
			// test root.
			if r.root != "" {
				if rel, err := filepath.Rel(r.root, d); err == nil {
					l.Path = "/" + rel
				}
			}
			out = append(out, l)
		}
	}
	if l, ok, err := r.nprocLimit(); err != nil {
		errs = append(errs, err)
	} else if ok {
		out = append(out, l)
	}
	ks, err := r.kernelLimits()
	if err != nil {
		errs = append(errs, err)
	}
	out = append(out, ks...)
	return out, errors.Join(errs...)
}

func (r *limitReader) forgetDirs() {
	r.mu.Lock()
	r.cgKey, r.cgDirs = "", nil
	r.mu.Unlock()
}

// pidsDirs returns the directories of this process's pids cgroup and its
// ancestors (up to the mount's root) that have a pids.max file.
func (r *limitReader) pidsDirs() ([]string, error) {
	b, err := os.ReadFile(r.path(fmt.Sprintf("/proc/%d/cgroup", r.pid)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // no cgroups (or no /proc): nothing to find
	}
	if err != nil {
		return nil, fmt.Errorf("sched: thread limits: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cgKey != "" && string(b) == r.cgKey {
		return r.cgDirs, nil
	}
	fs, err := procfs.NewFS(r.path("/proc"))
	if err != nil {
		return nil, fmt.Errorf("sched: thread limits: %w", err)
	}
	proc, err := fs.Proc(r.pid)
	if err != nil {
		return nil, fmt.Errorf("sched: thread limits: %w", err)
	}
	mounts, err := proc.MountInfo()
	if err != nil {
		return nil, fmt.Errorf("sched: thread limits: reading mountinfo: %w", err)
	}
	var dirs []string
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		v2 := f[0] == "0" && f[1] == ""
		if !v2 && !slices.Contains(strings.Split(f[1], ","), "pids") {
			continue
		}
		for _, m := range mounts {
			if v2 && m.FSType != "cgroup2" {
				continue
			}
			if !v2 {
				if _, ok := m.SuperOptions["pids"]; m.FSType != "cgroup" || !ok {
					continue
				}
			}
			if ds := r.walkUp(m.MountPoint, m.Root, f[2]); ds != nil {
				dirs = append(dirs, ds...)
				break
			}
		}
	}
	r.cgKey, r.cgDirs = string(b), dirs
	return dirs, nil
}

// walkUp maps cgroup path cg (as /proc/self/cgroup shows it) into the
// mount of that hierarchy at mountPoint, whose root is mountRoot, and
// returns it and its ancestors up to the mount point that have a pids.max
// file, innermost first; nil when the path is not inside this mount.
func (r *limitReader) walkUp(mountPoint, mountRoot, cg string) []string {
	return walkUp(r.path(mountPoint), mountRoot, cg, "pids.max")
}

// walkUp maps cgroup path cg into the mount whose directory (in this
// tree) is top and whose root is mountRoot, and returns that directory and
// its ancestors up to top that have file (every one when file is ""),
// innermost first; nil when the path is not inside this mount, empty when
// no directory has the file.
func walkUp(top, mountRoot, cg, file string) []string {
	cg = path.Clean(cg)
	if !strings.HasPrefix(cg, "/") || strings.Contains(cg, "/..") {
		return nil // outside our cgroup namespace
	}
	rel := cg
	if mountRoot != "/" {
		r, ok := strings.CutPrefix(cg, mountRoot)
		if !ok || (r != "" && r[0] != '/') {
			return nil
		}
		rel = r
	}
	dir := filepath.Join(top, rel)
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	out := []string{}
	for d := dir; ; d = filepath.Dir(d) {
		if file == "" {
			out = append(out, d)
		} else if _, err := os.Stat(filepath.Join(d, file)); err == nil {
			out = append(out, d)
		}
		if d == top || len(d) <= len(top) {
			break
		}
	}
	return out
}

// readPids reads pids.max and pids.current of cgroup directory dir; ok is
// false when pids.max is "max".
func readPids(dir string) (ThreadLimit, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "pids.max"))
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: thread limits: %w", err)
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return ThreadLimit{}, false, nil
	}
	max, err := strconv.Atoi(s)
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: thread limits: %s/pids.max: %q", dir, s)
	}
	cur, err := readInt(filepath.Join(dir, "pids.current"))
	if err != nil {
		return ThreadLimit{}, false, err
	}
	return ThreadLimit{Name: "pids.max", Path: dir, Max: max, Current: cur}, true, nil
}

func readInt(file string) (int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("sched: thread limits: %w", err)
	}
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return 0, fmt.Errorf("sched: thread limits: %s: %w", file, err)
	}
	return n, nil
}

// nprocLimit returns RLIMIT_NPROC against this process's thread count,
// unless the limit is infinite or the kernel ignores it for this process.
func (r *limitReader) nprocLimit() (ThreadLimit, bool, error) {
	cur, err := r.nproc()
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: getrlimit(RLIMIT_NPROC): %w", err)
	}
	if cur == unix.RLIM_INFINITY || cur > math.MaxInt32 || r.exempt() {
		return ThreadLimit{}, false, nil
	}
	fs, err := procfs.NewFS(r.path("/proc"))
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: thread limits: %w", err)
	}
	p, err := fs.Proc(r.pid)
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: thread limits: %w", err)
	}
	st, err := p.Stat()
	if err != nil {
		return ThreadLimit{}, false, fmt.Errorf("sched: thread limits: %w", err)
	}
	return ThreadLimit{Name: "RLIMIT_NPROC", Max: int(cur), Current: st.NumThreads}, true, nil
}

// kernelLimits returns kernel.threads-max and kernel.pid_max against the
// number of tasks in the system (/proc/loadavg's "running/total" field).
func (r *limitReader) kernelLimits() ([]ThreadLimit, error) {
	b, err := os.ReadFile(r.path("/proc/loadavg"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sched: thread limits: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return nil, fmt.Errorf("sched: thread limits: /proc/loadavg: %q", b)
	}
	_, total, ok := strings.Cut(f[3], "/")
	tasks, err := strconv.Atoi(total)
	if !ok || err != nil {
		return nil, fmt.Errorf("sched: thread limits: /proc/loadavg: %q", b)
	}
	var out []ThreadLimit
	for _, k := range []string{"threads-max", "pid_max"} {
		n, err := readInt(r.path("/proc/sys/kernel/" + k))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, ThreadLimit{Name: "kernel." + k, Max: n, Current: tasks})
	}
	return out, nil
}

// Capability bits.
const (
	capSysAdmin    = 21
	capSysResource = 24
)

// nprocExempt reports whether the kernel ignores RLIMIT_NPROC for threads
// of this process: the real uid is root of the initial user namespace, or
// the process holds CAP_SYS_RESOURCE or CAP_SYS_ADMIN there (capable()
// checks the initial namespace; inside another user namespace neither
// counts, so the limit is assumed to apply).
func nprocExempt() bool {
	if !inInitUserNS() {
		return false
	}
	if unix.Getuid() == 0 {
		return true
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	eff := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	return eff&(1<<capSysAdmin|1<<capSysResource) != 0
}

var initNS struct {
	sync.Once
	yes bool
}

// inInitUserNS reports whether the process runs in the initial user
// namespace: its uid_map is the identity over all 2^32-1 ids.
func inInitUserNS() bool {
	initNS.Do(func() {
		b, err := os.ReadFile("/proc/self/uid_map")
		if err != nil {
			initNS.yes = true // no user namespaces in this kernel
			return
		}
		f := strings.Fields(string(b))
		initNS.yes = len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
	})
	return initNS.yes
}

// NiceFloor returns the lowest nice a thread of this process may lower its
// own nice to: -20 with CAP_SYS_NICE, else 20 - RLIMIT_NICE's soft limit
// (sched_setattr and setpriority check can_nice() only when the new nice
// is below the thread's current one). With RLIMIT_NICE 0, the default, the
// result is 20: a thread may raise its nice but never lower it again. One
// getrlimit (and a capget the first time).
func NiceFloor() int {
	if HasCapSysNice() {
		return -20
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rl); err != nil {
		return 20
	}
	if rl.Cur >= 40 {
		return -20
	}
	return 20 - int(rl.Cur)
}
