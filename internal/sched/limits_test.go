package sched

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/internal/testutil"
)

// fakeTree writes files (path -> content) under a temporary root.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// stat1 is a /proc/1/stat with num_threads (field 20) = 17.
const stat1 = "1 (gowq test) S 0 1 1 0 -1 4194304 103 0 0 0 0 0 0 0 20 0 17 0 71671 3133440 417 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n"

const mountsV1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func reader(root string, nproc uint64, exempt bool) *limitReader {
	return &limitReader{
		root:   root,
		pid:    1,
		uid:    func() int { return 1000 },
		nproc:  func() (uint64, error) { return nproc, nil },
		exempt: func() bool { return exempt },
	}
}

func find(ls []ThreadLimit, name string) (ThreadLimit, bool) {
	for _, l := range ls {
		if l.Name == name {
			return l, true
		}
	}
	return ThreadLimit{}, false
}

// TestThreadLimitsFake reads fake /proc and /sys trees: cgroup v1 and v2,
// nested limits, a mount of a sub-hierarchy, paths outside the cgroup
// namespace, RLIMIT_NPROC applying or not, and the kernel's limits.
func TestThreadLimitsFake(t *testing.T) {
	kernel := map[string]string{
		"proc/loadavg":                "0.00 0.01 0.00 2/300 12345\n",
		"proc/sys/kernel/threads-max": "192730\n",
		"proc/sys/kernel/pid_max":     "32768\n",
		"proc/1/stat":                 stat1,
		"proc/1/mountinfo":            mountsV1,
		"sys/fs/cgroup/pids/.keep":    "",
		"sys/fs/cgroup/unified/.keep": "",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range kernel {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	type want struct {
		name     string
		path     string
		max, cur int
	}
	cases := []struct {
		name  string
		files map[string]string
		nproc uint64
		exmpt bool
		want  []want // besides the kernel's two
		tight want
	}{
		{
			name: "v1 nested, inner max",
			files: with(map[string]string{
				"proc/1/cgroup":                        "9:name=systemd:/\n8:pids:/job/step\n1:cpu:/\n0::/\n",
				"sys/fs/cgroup/pids/job/pids.max":      "100\n",
				"sys/fs/cgroup/pids/job/pids.current":  "40\n",
				"sys/fs/cgroup/pids/job/step/pids.max": "max\n",
			}),
			nproc: unix.RLIM_INFINITY,
			want:  []want{{"pids.max", "/sys/fs/cgroup/pids/job", 100, 40}},
			tight: want{"pids.max", "/sys/fs/cgroup/pids/job", 100, 40},
		},
		{
			name: "v1 both levels limited",
			files: with(map[string]string{
				"proc/1/cgroup":                            "8:pids:/job/step\n",
				"sys/fs/cgroup/pids/job/pids.max":          "100\n",
				"sys/fs/cgroup/pids/job/pids.current":      "95\n",
				"sys/fs/cgroup/pids/job/step/pids.max":     "50\n",
				"sys/fs/cgroup/pids/job/step/pids.current": "20\n",
			}),
			nproc: unix.RLIM_INFINITY,
			want: []want{
				{"pids.max", "/sys/fs/cgroup/pids/job/step", 50, 20},
				{"pids.max", "/sys/fs/cgroup/pids/job", 100, 95},
			},
			tight: want{"pids.max", "/sys/fs/cgroup/pids/job", 100, 95},
		},
		{
			name: "v1 sub-hierarchy mounted (container without cgroupns)",
			files: with(map[string]string{
				"proc/1/mountinfo":                  "39 31 0:36 /docker/abc /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n",
				"proc/1/cgroup":                     "8:pids:/docker/abc/inner\n",
				"sys/fs/cgroup/pids/pids.max":       "64\n",
				"sys/fs/cgroup/pids/pids.current":   "10\n",
				"sys/fs/cgroup/pids/inner/pids.max": "max\n",
			}),
			nproc: unix.RLIM_INFINITY,
			want:  []want{{"pids.max", "/sys/fs/cgroup/pids", 64, 10}},
			tight: want{"pids.max", "/sys/fs/cgroup/pids", 64, 10},
		},
		{
			name: "v2 unified",
			files: with(map[string]string{
				"proc/1/mountinfo":                          "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n",
				"proc/1/cgroup":                             "0::/user.slice/app\n",
				"sys/fs/cgroup/user.slice/pids.max":         "max\n",
				"sys/fs/cgroup/user.slice/pids.current":     "70\n",
				"sys/fs/cgroup/user.slice/app/pids.max":     "30\n",
				"sys/fs/cgroup/user.slice/app/pids.current": "12\n",
				"sys/fs/cgroup/user.slice/app/cgroup.procs": "1\n",
				"sys/fs/cgroup/cgroup.controllers":          "cpu pids\n",
			}),
			nproc: unix.RLIM_INFINITY,
			want:  []want{{"pids.max", "/sys/fs/cgroup/user.slice/app", 30, 12}},
			tight: want{"pids.max", "/sys/fs/cgroup/user.slice/app", 30, 12},
		},
		{
			name: "path outside the cgroup namespace",
			files: with(map[string]string{
				"proc/1/cgroup":                   "8:pids:/../other\n",
				"sys/fs/cgroup/pids/pids.max":     "5\n",
				"sys/fs/cgroup/pids/pids.current": "1\n",
			}),
			nproc: unix.RLIM_INFINITY,
			tight: want{"kernel.pid_max", "", 32768, 300},
		},
		{
			name: "RLIMIT_NPROC applies",
			files: with(map[string]string{
				"proc/1/cgroup": "8:pids:/\n",
			}),
			nproc: 40,
			want:  []want{{"RLIMIT_NPROC", "", 40, 17}},
			tight: want{"RLIMIT_NPROC", "", 40, 17},
		},
		{
			name: "RLIMIT_NPROC ignored (root or CAP_SYS_RESOURCE)",
			files: with(map[string]string{
				"proc/1/cgroup": "8:pids:/\n",
			}),
			nproc: 40,
			exmpt: true,
			tight: want{"kernel.pid_max", "", 32768, 300},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := fakeTree(t, c.files)
			r := reader(root, c.nproc, c.exmpt)
			ls, err := r.limits()
			if err != nil {
				t.Fatalf("limits: %v", err)
			}
			var got []want
			for _, l := range ls {
				if !strings.HasPrefix(l.Name, "kernel.") {
					got = append(got, want{l.Name, l.Path, l.Max, l.Current})
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("limits %v, want %v", got, c.want)
			}
			if l, ok := find(ls, "kernel.threads-max"); !ok || l.Max != 192730 || l.Current != 300 {
				t.Errorf("threads-max: %+v %v", l, ok)
			}
			n, tight := tightest(ls)
			if g := (want{tight.Name, tight.Path, tight.Max, tight.Current}); g != c.tight || n != c.tight.max-c.tight.cur {
				t.Errorf("tightest %v (headroom %d), want %v", g, n, c.tight)
			}
			// A second reading uses the cached directories and agrees.
			ls2, err := r.limits()
			if err != nil || fmt.Sprint(ls2) != fmt.Sprint(ls) {
				t.Errorf("second reading %v, %v; first %v", ls2, err, ls)
			}
		})
	}
}

// TestThreadLimitsFakeErrors: a malformed pids.max is an error, and a
// cgroup removed after it was found is looked up again.
func TestThreadLimitsFakeErrors(t *testing.T) {
	root := fakeTree(t, map[string]string{
		"proc/1/mountinfo":                    mountsV1,
		"proc/1/cgroup":                       "8:pids:/job\n",
		"sys/fs/cgroup/pids/job/pids.max":     "lots\n",
		"sys/fs/cgroup/pids/job/pids.current": "1\n",
	})
	r := reader(root, unix.RLIM_INFINITY, false)
	if _, err := r.limits(); err == nil || !strings.Contains(err.Error(), "pids.max") {
		t.Errorf("malformed pids.max: err %v", err)
	}
	if err := os.WriteFile(filepath.Join(root, "sys/fs/cgroup/pids/job/pids.max"), []byte("9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ls, err := r.limits()
	if l, ok := find(ls, "pids.max"); err != nil || !ok || l.Max != 9 {
		t.Errorf("after fixing pids.max: %v %v", ls, err)
	}
	// The process moves to another cgroup: found through the new
	// /proc/self/cgroup content.
	if err := os.MkdirAll(filepath.Join(root, "sys/fs/cgroup/pids/other"), 0o755); err != nil {
		t.Fatal(err)
	}
	for f, c := range map[string]string{
		"sys/fs/cgroup/pids/other/pids.max":     "77\n",
		"sys/fs/cgroup/pids/other/pids.current": "3\n",
		"proc/1/cgroup":                         "8:pids:/other\n",
	} {
		if err := os.WriteFile(filepath.Join(root, f), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ls, err = r.limits()
	if l, ok := find(ls, "pids.max"); err != nil || !ok || l.Max != 77 || l.Path != "/sys/fs/cgroup/pids/other" {
		t.Errorf("after moving: %v %v", ls, err)
	}
}

// TestThreadLimitText: each limit names itself and a fix.
func TestThreadLimitText(t *testing.T) {
	for _, l := range []ThreadLimit{
		{Name: "pids.max", Path: "/sys/fs/cgroup/pids/job", Max: 24, Current: 20},
		{Name: "RLIMIT_NPROC", Max: 50, Current: 44},
		{Name: "kernel.threads-max", Max: 100, Current: 99},
		{Name: "kernel.pid_max", Max: 100, Current: 99},
	} {
		s, fix := l.String(), l.Fix()
		if !strings.Contains(s, l.Name) || !strings.Contains(s, strconv.Itoa(l.Max)) || !strings.Contains(s, strconv.Itoa(l.Current)) {
			t.Errorf("%s: String %q lacks the name or the numbers", l.Name, s)
		}
		if !strings.Contains(fix, "raise it") {
			t.Errorf("%s: Fix %q", l.Name, fix)
		}
		if l.Headroom() != l.Max-l.Current {
			t.Errorf("%s: Headroom %d", l.Name, l.Headroom())
		}
	}
	if n, l := tightest(nil); n != math.MaxInt || l.Name != "" {
		t.Errorf("no limits: %d %+v", n, l)
	}
}

// TestThreadLimitsReal reads this machine's limits without error.
func TestThreadLimitsReal(t *testing.T) {
	ls, err := ThreadLimits()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := find(ls, "kernel.threads-max"); !ok {
		t.Errorf("no kernel.threads-max among %v", ls)
	}
	_, hasNproc := find(ls, "RLIMIT_NPROC")
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_NPROC, &rl)
	if os.Getuid() == 0 && inInitUserNS() && hasNproc {
		t.Errorf("RLIMIT_NPROC reported for root, which the kernel exempts: %v", ls)
	}
	if os.Getuid() != 0 && !nprocExempt() && rl.Cur != unix.RLIM_INFINITY && !hasNproc {
		t.Errorf("RLIMIT_NPROC %d not reported for uid %d: %v", rl.Cur, os.Getuid(), ls)
	}
}

const limitsChildEnv = "GOWQ_SCHED_LIMITS_CHILD"

// TestThreadLimitsRealCgroup runs a child in a new pids cgroup with a
// pids.max (as root, where the pids controller is mounted) and checks that
// the child finds that cgroup, its limit and its count; then a child as
// an unprivileged uid with RLIMIT_NPROC set, which must report it, while
// root with the same rlimit is exempt.
func TestThreadLimitsRealCgroup(t *testing.T) {
	if os.Getenv(limitsChildEnv) != "" {
		n, l, err := ThreadHeadroom()
		ls, _ := ThreadLimits()
		fmt.Printf("HEADROOM %d %q %d %d %v\nLIMITS %v\n", n, l.Name, l.Max, l.Current, err, ls)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a pids cgroup and start a child as another user")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, cmd *exec.Cmd) string {
		t.Helper()
		cmd.Env = append(os.Environ(), limitsChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	t.Run("pids.max", func(t *testing.T) {
		dir, _ := testutil.NewCgroup(t, "pids")
		if err := testutil.WriteCgroup(dir, "pids.max", "500"); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^TestThreadLimitsRealCgroup$")
		testutil.StartInCgroup(cmd, dir)
		out := run(t, cmd)
		if !strings.Contains(out, `"pids.max" 500 `) {
			t.Errorf("child in %s did not report pids.max 500 as its tightest limit:\n%s", dir, out)
		}
		if !strings.Contains(out, dir) {
			t.Errorf("child did not name the cgroup %s:\n%s", dir, out)
		}
	})
	t.Run("RLIMIT_NPROC", func(t *testing.T) {
		// A copy of the binary that any user may run, as an otherwise
		// unused uid (nprocUID), so that no other process counts against
		// its limit.
		cmd, _ := testutil.NobodyCommand(t, nil)
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			t.Skip("no prlimit command")
		}
		cmd.Args = []string{"prlimit", "--nproc=300", cmd.Path, "-test.run=^TestThreadLimitsRealCgroup$"}
		cmd.Path = prlimit
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nprocUID, Gid: nprocUID}
		out := run(t, cmd)
		if !strings.Contains(out, `"RLIMIT_NPROC" 300 `) {
			t.Errorf("unprivileged child with RLIMIT_NPROC 300 did not report it:\n%s", out)
		}
		cmd = exec.Command(prlimit, "--nproc=300", self, "-test.run=^TestThreadLimitsRealCgroup$")
		out = run(t, cmd)
		if strings.Contains(out, "RLIMIT_NPROC") {
			t.Errorf("root child reported RLIMIT_NPROC, which the kernel ignores for root:\n%s", out)
		}
	})
}

// nprocUID is the uid of the RLIMIT_NPROC child: RLIMIT_NPROC counts every
// task of the user, so it is one no other process uses. It depends on the
// test process, so that test runs of other checkouts at the same time do
// not share it, and its range (64330-74329) is not the root package's
// (54330-64329).
var nprocUID = uint32(64330 + os.Getpid()%10000)
