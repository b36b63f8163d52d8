package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewCgroup creates a cgroup for the test in the hierarchy that has
// controller ("pids", "cpu", "cpuset", ...) and removes it when the test
// ends (after the processes in it have exited). It looks for a cgroup v1
// hierarchy with that controller first, then the cgroup v2 hierarchy when
// the controller is enabled below its root (cgroup.subtree_control). A new
// cpuset cgroup gets its parent's cpus and mems, so that tasks can join
// it. It skips the test when the process is not root or no such
// hierarchy is mounted. It returns the cgroup's directory and whether it
// is cgroup v2.
func NewCgroup(t testing.TB, controller string) (dir string, v2 bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to create a %s cgroup", controller)
	}
	base, v2, err := hierarchy(controller)
	if err != nil {
		t.Skipf("no usable %s cgroup controller: %v", controller, err)
	}
	removeStale(base)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir = filepath.Join(base, fmt.Sprintf("gowq-test-%d-%s", os.Getpid(), name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a %s cgroup: %v", controller, err)
	}
	t.Cleanup(func() {
		// The kernel may take a moment to release the exited tasks.
		var err error
		for range 100 {
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("removing cgroup %s: %v", dir, err)
	})
	if controller == "cpuset" && !v2 {
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(base, f))
			if err == nil {
				err = WriteCgroup(dir, f, strings.TrimSpace(string(b)))
			}
			if err != nil {
				t.Fatalf("setting up cpuset cgroup %s: %v", dir, err)
			}
		}
	}
	return dir, v2
}

// removeStale removes the empty test cgroups under base left by test
// processes that died without cleaning up (a test binary killed by its
// -timeout does not run t.Cleanup): gowq-test-<pid>-* whose pid is gone.
func removeStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "gowq-test-*"))
	for _, d := range dirs {
		f := strings.SplitN(filepath.Base(d), "-", 4)
		if len(f) < 4 {
			continue
		}
		if pid, err := strconv.Atoi(f[2]); err == nil {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
				_ = os.Remove(d) // fails, harmlessly, while tasks remain
			}
		}
	}
}

// WriteCgroup writes value to the control file file of cgroup dir.
func WriteCgroup(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
}

// ReadCgroup reads the control file file of cgroup dir, trimmed.
func ReadCgroup(dir, file string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	return strings.TrimSpace(string(b)), err
}

// StartInCgroup makes cmd move itself into cgroup dir before it runs: it
// is rewritten to start a shell that writes its pid to cgroup.procs and
// then execs the original program, so that every thread of the program is
// created inside the cgroup. The credentials in cmd.SysProcAttr apply to
// the shell, so it must be set up by root before a user switch; use it
// only for root children, and MoveToCgroup for others.
func StartInCgroup(cmd *exec.Cmd, dir string) {
	args := append([]string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	cmd.Args = args
}

// MoveToCgroup moves process pid (all its threads) into cgroup dir.
func MoveToCgroup(dir string, pid int) error {
	return WriteCgroup(dir, "cgroup.procs", fmt.Sprint(pid))
}

// hierarchy returns the root directory of the hierarchy with controller.
func hierarchy(controller string) (string, bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var unified string
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		switch {
		case qf[0] == "cgroup" && strings.Contains(","+qf[2]+",", ","+controller+","):
			return pf[4], false, nil
		case qf[0] == "cgroup2" && unified == "":
			unified = pf[4]
		}
	}
	if unified == "" {
		return "", false, fmt.Errorf("no %s controller mounted", controller)
	}
	b, _ := os.ReadFile(filepath.Join(unified, "cgroup.subtree_control"))
	for _, c := range strings.Fields(string(b)) {
		if c == controller {
			return unified, true, nil
		}
	}
	return "", false, fmt.Errorf("cgroup v2 at %s does not enable %s for its children", unified, controller)
}
