package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary run childMain instead of the tests.
const childEnv = "GOWQ_TOPOLOGY_TEST_CHILD"

// childMain runs in a re-executed test binary: it watches the real system
// every 5 ms, prints "ready online=L", then "changed online=L cgroup=L
// found=B" at the first change, and exits. The parent test changes the
// child's affinity or cgroup from outside, so the test process itself is
// never narrowed.
func childMain() int {
	changed := make(chan struct{})
	var once bool
	w := NewWatcher(&SysfsSource{}, 5*time.Millisecond, func(old, new *Topology) {
		if old == nil || once {
			return
		}
		once = true // onChange calls never overlap
		cg, found, err := cgroupCPUs("/")
		fmt.Printf("changed online=%s cgroup=%s found=%v err=%v\n", new.Online, cg, found, err)
		close(changed)
	})
	t, _, err := w.Rescan()
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	fmt.Printf("ready online=%s\n", t.Online)
	w.Start()
	defer w.Stop()
	select {
	case <-changed:
		return 0
	case <-time.After(60 * time.Second):
		fmt.Println("timeout")
		return 1
	}
}

// startChild starts childMain in a new process and returns it once it is
// ready, with the online set it reported and a reader for its next lines.
func startChild(t *testing.T) (*exec.Cmd, CPUSet, *bufio.Reader) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("child stderr: %s", stderr.String())
		}
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	list, ok := strings.CutPrefix(strings.TrimSpace(line), "ready online=")
	if err != nil || !ok {
		t.Fatalf("child: %q, %v", line, err)
	}
	return cmd, mustList(t, list), r
}

// expectChange reads the child's change report.
func expectChange(t *testing.T, r *bufio.Reader) (online, cgroup string, found bool) {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("child: %q, %v", line, err)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "changed online=%s cgroup=%s found=%t", &online, &cgroup, &found); err != nil {
		// cgroup may be empty, which Sscanf cannot express; parse by hand.
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != "changed" {
			t.Fatalf("child said %q", line)
		}
		online = strings.TrimPrefix(f[1], "online=")
		cgroup = strings.TrimPrefix(f[2], "cgroup=")
		found = f[3] == "found=true"
	}
	return online, cgroup, found
}

func needTwoCPUs(t *testing.T) CPUSet {
	t.Helper()
	aff, err := ProcessAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if aff.Len() < 2 {
		t.Skipf("needs at least 2 CPUs in the affinity, have %q", aff)
	}
	return aff
}

// TestExternalAffinityChange narrows a child process's affinity from
// outside, as "taskset -p CPU PID" does (sched_setaffinity on the PID, i.e.
// the main thread only), and checks that the child's Watcher sees Online
// shrink.
func TestExternalAffinityChange(t *testing.T) {
	needTwoCPUs(t)
	cmd, online, r := startChild(t)
	if online.Len() < 2 {
		t.Skipf("child has only %q online", online)
	}
	target := NewCPUSet(online.Last())
	u, err := target.Unix()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedSetaffinity(cmd.Process.Pid, &u); errors.Is(err, unix.EPERM) {
		t.Skipf("sched_setaffinity on the child: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := expectChange(t, r); got != target.String() {
		t.Fatalf("child's online after taskset = %q, want %q", got, target)
	}
}

// TestCgroupCpusetChange moves a child process into a new cgroup whose
// cpuset holds one CPU, and checks that the child's Watcher sees Online
// shrink and reads the cgroup's effective cpuset itself. Needs root and a
// writable cpuset hierarchy (v1 at /sys/fs/cgroup/cpuset, or v2 at
// /sys/fs/cgroup with the cpuset controller enabled for children).
func TestCgroupCpusetChange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a cgroup")
	}
	aff := needTwoCPUs(t)
	target := NewCPUSet(aff.Last())
	name := fmt.Sprintf("gowq-topology-test-%d", os.Getpid())
	var dir string
	write := func(file, s string) error { return os.WriteFile(filepath.Join(dir, file), []byte(s), 0o644) }
	if _, err := os.Stat("/sys/fs/cgroup/cpuset/cgroup.procs"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup/cpuset", name) // cgroup v1
	} else if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil &&
		strings.Contains(string(b), "cpuset") {
		dir = filepath.Join("/sys/fs/cgroup", name) // cgroup v2
	} else {
		t.Skip("no writable cpuset cgroup hierarchy at /sys/fs/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing test cgroup: %v", err)
		}
	})
	if err := write("cpuset.cpus", target.String()); err != nil {
		t.Skipf("cannot set cpuset.cpus: %v", err)
	}
	if mems, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "cpuset.mems")); err == nil {
		// v1 needs mems before tasks can join; v2 inherits them.
		if err := write("cpuset.mems", strings.TrimSpace(string(mems))); err != nil {
			t.Skipf("cannot set cpuset.mems: %v", err)
		}
	}
	// Registered after the cgroup cleanup, so it runs first: the child
	// must be gone before the cgroup can be removed.
	cmd, online, r := startChild(t)
	if !target.IsSubset(online) {
		t.Skipf("child online %q lacks CPU %q", online, target)
	}
	if err := write("cgroup.procs", fmt.Sprint(cmd.Process.Pid)); err != nil {
		t.Skipf("cannot move the child into the cgroup: %v", err)
	}
	gotOnline, gotCgroup, found := expectChange(t, r)
	if gotOnline != target.String() {
		t.Fatalf("child's online in the cgroup = %q, want %q", gotOnline, target)
	}
	if !found || gotCgroup != target.String() {
		t.Fatalf("child read cgroup cpuset %q (found %v), want %q", gotCgroup, found, target)
	}
}

// runOffMainThread runs f on a locked OS thread that is not the main
// thread, and lets that thread die afterwards, so whatever f changes on
// its thread never leaks into the rest of the process.
func runOffMainThread(f func()) {
	done := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// Running on the main thread: while we hold it locked, a new
			// goroutine must run on another thread. Nothing was changed
			// here, so unlocking is safe.
			inner := make(chan struct{})
			go func() { run(); close(inner) }()
			<-inner
			runtime.UnlockOSThread()
			return
		}
		f()
		// Exit still locked: the runtime destroys the thread.
	}
	go func() { run(); close(done) }()
	<-done
}

// TestProcessAffinityIsMainThread checks the facts ProcessAffinity relies
// on: narrowing a worker thread (as gowq does) changes neither
// sched_getaffinity(getpid()) nor /proc/self/status, only the thread's own
// mask and /proc/thread-self/status.
func TestProcessAffinityIsMainThread(t *testing.T) {
	aff := needTwoCPUs(t)
	before, err := (&SysfsSource{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	narrow := NewCPUSet(aff.First())
	var errs []string
	runOffMainThread(func() {
		u, _ := narrow.Unix()
		if err := unix.SchedSetaffinity(0, &u); err != nil {
			errs = append(errs, fmt.Sprintf("narrowing the thread: %v", err))
			return
		}
		var own unix.CPUSet
		if err := unix.SchedGetaffinity(0, &own); err != nil || !FromUnix(&own).Equal(narrow) {
			errs = append(errs, fmt.Sprintf("thread mask %v, %v; want %v", FromUnix(&own), err, narrow))
		}
		if got, err := ProcessAffinity(); err != nil || !got.Equal(aff) {
			errs = append(errs, fmt.Sprintf("ProcessAffinity = %q, %v; want %q", got, err, aff))
		}
		if got, err := statusAffinity("/proc/self/status"); err != nil || !got.Equal(aff) {
			errs = append(errs, fmt.Sprintf("/proc/self/status = %q, %v; want %q", got, err, aff))
		}
		if got, err := statusAffinity("/proc/thread-self/status"); err != nil || !got.Equal(narrow) {
			errs = append(errs, fmt.Sprintf("/proc/thread-self/status = %q, %v; want %q", got, err, narrow))
		}
		if topo, err := (&SysfsSource{}).Read(); err != nil || !topo.Equal(before) {
			errs = append(errs, fmt.Sprintf("SysfsSource.Read = %v, %v; want %v", topo, err, before))
		}
	})
	for _, e := range errs {
		t.Error(e)
	}
}
