package topology

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ProcessAffinity returns the CPU affinity of the process as a whole: the
// mask of its main thread (the thread group leader, whose thread id equals
// the process id), read with sched_getaffinity(getpid()).
//
// Why the main thread: on Linux affinity is per thread, and gowq narrows the
// affinity of its own worker threads, so the mask of "the calling thread"
// (sched_getaffinity(0), /proc/thread-self/status) depends on which thread
// happens to run the caller. The main thread's mask is what "taskset -p PID"
// (without -a) and most tools change from outside, and, as long as gowq
// never changes the main thread's affinity, it is what gowq was given. Note
// that /proc/self/status also shows the main thread's Cpus_allowed_list, not
// the reading thread's (only /proc/thread-self/status is per reading thread);
// tests in this package check both facts.
//
// Requirement on the rest of gowq: a goroutine locked with
// runtime.LockOSThread may be running on the main thread, so code that
// changes a thread's affinity, policy or nice value must first check that
// unix.Gettid() != unix.Getpid() and otherwise move to another thread.
//
// If sched_getaffinity fails (EINVAL when the kernel's nr_cpu_ids exceeds
// the 1024 CPUs of a unix.CPUSet), it falls back to Cpus_allowed_list in
// /proc/<pid>/status. It does not block beyond one system call or one file
// read, and returns an error only when both ways fail.
func ProcessAffinity() (CPUSet, error) {
	var u unix.CPUSet
	pid := unix.Getpid()
	err := unix.SchedGetaffinity(pid, &u)
	if err == nil {
		return FromUnix(&u), nil
	}
	set, ferr := statusAffinity(fmt.Sprintf("/proc/%d/status", pid))
	if ferr != nil {
		return CPUSet{}, fmt.Errorf("topology: sched_getaffinity(%d): %w; fallback: %w", pid, err, ferr)
	}
	return set, nil
}

// statusAffinity parses Cpus_allowed_list from a /proc/<pid>/status file.
func statusAffinity(file string) (CPUSet, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return CPUSet{}, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			set, err := ParseList(v)
			if err != nil {
				return CPUSet{}, fmt.Errorf("%s: %w", file, err)
			}
			return set, nil
		}
	}
	return CPUSet{}, fmt.Errorf("%s: no Cpus_allowed_list", file)
}

// cgroupCPUs returns the effective cpuset of the cgroups the process is in,
// read from <root>/proc/self/cgroup and the cgroup file systems at their
// usual mount points under <root>/sys/fs/cgroup: cgroup v2
// (cpuset.cpus.effective, unified or hybrid layout) and cgroup v1
// (cpuset.effective_cpus, else cpuset.cpus, under .../cgroup/cpuset). When a
// cgroup has no such file (the cpuset controller is not enabled there), its
// nearest ancestor that has one bounds it. found is false when nothing is
// readable; err is set only for a file that exists but does not parse.
func cgroupCPUs(root string) (set CPUSet, found bool, err error) {
	b, rerr := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if rerr != nil {
		return CPUSet{}, false, nil
	}
	for line := range strings.Lines(string(b)) {
		id, rest, ok1 := strings.Cut(strings.TrimSpace(line), ":")
		ctrls, cgPath, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		var mounts, files []string
		switch {
		case id == "0" && ctrls == "":
			mounts = []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"}
			files = []string{"cpuset.cpus.effective"}
		case slices.Contains(strings.Split(ctrls, ","), "cpuset"):
			mounts = []string{"sys/fs/cgroup/cpuset"}
			files = []string{"cpuset.effective_cpus", "cpuset.cpus"}
		default:
			continue
		}
		cpus, ok, err := findCgroupFile(root, mounts, cgPath, files)
		if err != nil {
			return CPUSet{}, false, err
		}
		if !ok {
			continue
		}
		if found {
			set = set.And(cpus)
		} else {
			set, found = cpus, true
		}
	}
	return set, found, nil
}

// findCgroupFile looks for the first non-empty file of files in the cgroup
// directory cgPath or its nearest ancestor, under each mount in turn.
func findCgroupFile(root string, mounts []string, cgPath string, files []string) (CPUSet, bool, error) {
	// A path outside our cgroup namespace shows up as "/../..."; it cannot
	// be resolved under the mount point, so it is ignored.
	if !strings.HasPrefix(cgPath, "/") || slices.Contains(strings.Split(cgPath, "/"), "..") {
		return CPUSet{}, false, nil
	}
	for _, m := range mounts {
		for p := path.Clean(cgPath); ; p = path.Dir(p) {
			for _, f := range files {
				file := filepath.Join(root, m, p, f)
				b, err := os.ReadFile(file)
				if err != nil || len(bytes.TrimSpace(b)) == 0 {
					continue
				}
				set, err := ParseList(string(b))
				if err != nil {
					return CPUSet{}, false, fmt.Errorf("topology: %s: %w", file, err)
				}
				return set, true, nil
			}
			if p == "/" {
				break
			}
		}
	}
	return CPUSet{}, false, nil
}
