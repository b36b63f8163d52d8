package sched

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gowq/wq/internal/testutil"
)

// limitsFile is a /proc/<pid>/limits with RLIMIT_NICE nice and
// RLIMIT_RTPRIO rtprio.
func limitsFile(nice, rtprio string) string {
	return "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n" +
		fmt.Sprintf("Max nice priority         %-20s %-20s \n", nice, nice) +
		fmt.Sprintf("Max realtime priority     %-20s %-20s \n", rtprio, rtprio)
}

func statusFile(capEff string, seccomp, nnp int) string {
	return fmt.Sprintf("Name:\tgowq\nCapEff:\t%s\nNoNewPrivs:\t%d\nSeccomp:\t%d\nSeccomp_filters:\t%d\n", capEff, nnp, seccomp, seccomp/2)
}

const (
	capAll  = "000001ffffffffff"
	capNone = "0000000000000000"
	// stat1Nice is stat1 at nice 0; statNiced at nice 19.
	statNiced = "1 (gowq test) S 0 1 1 0 -1 4194304 103 0 0 0 0 0 0 0 39 19 17 0 71671 3133440 417 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n"
	mountsV2  = "41 23 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"
)

// diagTree is a fixture tree with the given changes over a process that
// has every capability, no rlimits, is in the root cgroup v1 cpu group
// with a budget, and the kernel's default RT runtime.
func diagTree(t *testing.T, change map[string]string) *diagReader {
	t.Helper()
	files := map[string]string{
		"proc/1/status":                             statusFile(capAll, 0, 0),
		"proc/1/limits":                             limitsFile("0", "0"),
		"proc/1/stat":                               stat1,
		"proc/1/mountinfo":                          mountsV1,
		"proc/1/cgroup":                             "1:cpu:/\n0::/\n",
		"proc/sys/kernel/sched_rt_runtime_us":       "950000\n",
		"sys/fs/cgroup/cpu/cpu.rt_runtime_us":       "950000\n",
		"sys/fs/cgroup/pids/.keep":                  "",
		"sys/fs/cgroup/unified/.keep":               "",
		"sys/fs/cgroup/cpu/job/.keep":               "",
		"sys/fs/cgroup/cpu/job/inner/.keep":         "",
		"sys/fs/cgroup/cpu/other/.keep":             "",
		"sys/fs/cgroup/cpu/other/cpu.rt_runtime_us": "10000\n",
	}
	for k, v := range change {
		if v == "" {
			delete(files, k)
			continue
		}
		files[k] = v
	}
	return &diagReader{root: fakeTree(t, files), pid: 1, initNS: func() bool { return true }}
}

var (
	fifo1  = Attr{Policy: PolicyFIFO, Priority: 1}
	fifo50 = Attr{Policy: PolicyFIFO, Priority: 50}
	nice20 = Attr{Policy: PolicyNormal, Nice: -20}
	nice0  = Attr{Policy: PolicyNormal}
)

// TestDiagnoseClassFixtures: every cause, told apart, on fixture trees.
func TestDiagnoseClassFixtures(t *testing.T) {
	for _, c := range []struct {
		name    string
		change  map[string]string
		initNS  bool
		attr    Attr
		refused bool
		want    []string // causes, in order
		says    []string // words of the first blocker's text
	}{
		{name: "root, budget", attr: fifo50, initNS: true},
		{name: "root, nice -20", attr: nice20, initNS: true},
		{name: "no cap, no rlimit", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0)},
			want:   []string{CauseCap}, says: []string{"RLIMIT_RTPRIO is 0", "setcap cap_sys_nice+ep", "LimitRTPRIO=1", "--cap-add SYS_NICE"}},
		{name: "no cap, rtprio 10 < 50", attr: fifo50, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/limits": limitsFile("0", "10")},
			want:   []string{CauseRTPrio}, says: []string{"RLIMIT_RTPRIO is 10", "ulimit -r 50", "prlimit --rtprio=50"}},
		{name: "no cap, rtprio enough", attr: fifo50, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/limits": limitsFile("0", "99")}},
		{name: "no cap, rtprio unlimited", attr: fifo50, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/limits": limitsFile("0", "unlimited")}},
		{name: "no cap, nice -20", attr: nice20, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0)},
			want:   []string{CauseCap}, says: []string{"RLIMIT_NICE is 0", "ulimit -e 40"}},
		{name: "no cap, RLIMIT_NICE 30 for -20", attr: nice20, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/limits": limitsFile("30", "0")},
			want:   []string{CauseNice}, says: []string{"RLIMIT_NICE is 30", "nice floor -10", "LimitNICE=40"}},
		{name: "no cap, RLIMIT_NICE 40", attr: nice20, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/limits": limitsFile("40", "0")}},
		{name: "no cap, niced 19, nice 0", attr: nice0, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/stat": statNiced},
			want:   []string{CauseCap}, says: []string{"below the process's nice 19"}},
		{name: "no cap, nice 0 at nice 0", attr: nice0, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0)}},
		{name: "cap only in a user namespace", attr: fifo1, initNS: false,
			want: []string{CauseCap}, says: []string{"user namespace"}},
		{name: "no_new_privs noted", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 1)},
			want:   []string{CauseCap}, says: []string{"no_new_privs", "AmbientCapabilities=CAP_SYS_NICE"}},
		{name: "v1 own group at 0", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/cgroup": "1:cpu:/job\n", "sys/fs/cgroup/cpu/job/cpu.rt_runtime_us": "0\n"},
			want:   []string{CauseCgroupRT}, says: []string{"/sys/fs/cgroup/cpu/job ", "the process's cpu cgroup", "echo 100000 > /sys/fs/cgroup/cpu/job/cpu.rt_runtime_us", "--cpu-rt-runtime", "systemd"}},
		{name: "v1 nice class ignores the RT budget", attr: nice20, initNS: true,
			change: map[string]string{"proc/1/cgroup": "1:cpu:/job\n", "sys/fs/cgroup/cpu/job/cpu.rt_runtime_us": "0\n"}},
		{name: "v1 ancestor at 0", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/cgroup": "1:cpu:/job/inner\n", "sys/fs/cgroup/cpu/job/cpu.rt_runtime_us": "0\n", "sys/fs/cgroup/cpu/job/inner/cpu.rt_runtime_us": "0\n"},
			want:   []string{CauseCgroupRT}, says: []string{"cgroup /sys/fs/cgroup/cpu/job/inner (the process's", "echo 100000 > /sys/fs/cgroup/cpu/job/cpu.rt_runtime_us && echo 100000 > /sys/fs/cgroup/cpu/job/inner/cpu.rt_runtime_us"}},
		{name: "v1 group with a budget", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/cgroup": "1:cpu:/other\n"}},
		{name: "v1 cpu,cpuacct co-mounted", attr: fifo1, initNS: true,
			change: map[string]string{
				"proc/1/mountinfo": "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n",
				"proc/1/cgroup":    "3:cpu,cpuacct:/docker/abc\n",
				"sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us":            "950000\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/cpu.rt_runtime_us":     "0\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.rt_runtime_us": "0\n"},
			want: []string{CauseCgroupRT}, says: []string{"/sys/fs/cgroup/cpu,cpuacct/docker/abc"}},
		{name: "no cap and a zero budget: both", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 0, 0), "proc/1/cgroup": "1:cpu:/job\n", "sys/fs/cgroup/cpu/job/cpu.rt_runtime_us": "0\n"},
			want:   []string{CauseCap, CauseCgroupRT}},
		{name: "v2 non-root, RT_GROUP_SCHED=y, cpu on", attr: fifo1, initNS: true,
			change: map[string]string{
				"proc/1/mountinfo": mountsV2, "proc/1/cgroup": "0::/system.slice/app.service\n",
				"sys/fs/cgroup/cpu/cpu.rt_runtime_us":                       "",
				"sys/fs/cgroup/cgroup.controllers":                          "cpu memory pids\n",
				"sys/fs/cgroup/cgroup.subtree_control":                      "cpu memory pids\n",
				"sys/fs/cgroup/system.slice/cgroup.subtree_control":         "cpu\n",
				"sys/fs/cgroup/system.slice/app.service/cgroup.controllers": "cpu\n",
				"proc/sys/kernel/osrelease":                                 "6.1.0-test\n",
				"boot/config-6.1.0-test":                                    "CONFIG_CGROUP_SCHED=y\nCONFIG_RT_GROUP_SCHED=y\n"},
			want: []string{CauseCgroupV2RT}, says: []string{"/sys/fs/cgroup/system.slice/app.service", "only allowed in the root group"}},
		{name: "v2 non-root, RT_GROUP_SCHED off", attr: fifo1, initNS: true,
			change: map[string]string{
				"proc/1/mountinfo": mountsV2, "proc/1/cgroup": "0::/system.slice/app.service\n",
				"sys/fs/cgroup/cpu/cpu.rt_runtime_us":                       "",
				"sys/fs/cgroup/system.slice/cgroup.subtree_control":         "cpu\n",
				"sys/fs/cgroup/system.slice/app.service/cgroup.controllers": "cpu\n",
				"proc/sys/kernel/osrelease":                                 "6.1.0-test\n",
				"boot/config-6.1.0-test":                                    "# CONFIG_RT_GROUP_SCHED is not set\n"}},
		{name: "v2 root group", attr: fifo1, initNS: true,
			change: map[string]string{
				"proc/1/mountinfo": mountsV2, "proc/1/cgroup": "0::/\n",
				"sys/fs/cgroup/cpu/cpu.rt_runtime_us":  "",
				"sys/fs/cgroup/cgroup.subtree_control": "cpu\n",
				"proc/sys/kernel/osrelease":            "6.1.0-test\n",
				"boot/config-6.1.0-test":               "CONFIG_RT_GROUP_SCHED=y\n"}},
		{name: "sched_rt_runtime_us 0", attr: fifo1, initNS: true,
			change: map[string]string{"proc/sys/kernel/sched_rt_runtime_us": "0\n"},
			want:   []string{CauseSysctlRT}, says: []string{"is 0", "sysctl -w kernel.sched_rt_runtime_us=950000"}},
		{name: "sched_rt_runtime_us -1 is allowed", attr: fifo1, initNS: true,
			change: map[string]string{"proc/sys/kernel/sched_rt_runtime_us": "-1\n"}},
		{name: "seccomp, not refused", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/status": statusFile(capAll, 2, 1)}},
		{name: "seccomp, refused", attr: fifo1, initNS: true, refused: true,
			change: map[string]string{"proc/1/status": statusFile(capAll, 2, 1)},
			want:   []string{CauseSeccomp}, says: []string{"Seccomp: 2", "--security-opt seccomp="}},
		{name: "refused, nothing found", attr: fifo1, initNS: true, refused: true,
			want: []string{CauseUnknown}, says: []string{"wqlab doctor"}},
		{name: "refused, cause found", attr: fifo1, initNS: true, refused: true,
			change: map[string]string{"proc/1/status": statusFile(capNone, 2, 0)},
			want:   []string{CauseCap}},
		{name: "no files at all", attr: fifo1, initNS: true,
			change: map[string]string{"proc/1/status": "", "proc/1/limits": "", "proc/1/cgroup": "", "proc/1/mountinfo": "", "proc/sys/kernel/sched_rt_runtime_us": "",
				"proc/1/stat": ""},
			want: []string{CauseCap}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := diagTree(t, c.change)
			ns := c.initNS
			r.initNS = func() bool { return ns }
			bs := r.diagnose(c.attr, c.refused)
			var got []string
			for _, b := range bs {
				got = append(got, b.Cause)
				if b.Detail == "" || b.Fix == "" {
					t.Errorf("blocker without detail or fix: %+v", b)
				}
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("causes %q, want %q: %v", got, c.want, bs)
			}
			for _, s := range c.says {
				if !strings.Contains(bs[0].String(), s) {
					t.Errorf("%q does not say %q", bs[0], s)
				}
			}
		})
	}
}

// TestDiagnoseClassReal checks the diagnosis against what the kernel does
// on this machine: a class with a blocker is refused by a probe thread,
// and a refusal is always explained.
func TestDiagnoseClassReal(t *testing.T) {
	for _, a := range []Attr{fifo1, fifo50, nice20, nice0} {
		bs := DiagnoseClass(a)
		err := Probe(nil, &a)
		t.Logf("%s: probe %v; blockers %v", a, err, bs)
		if len(bs) > 0 && !errors.Is(err, ErrPermission) {
			t.Errorf("%s: diagnosed %v but the kernel accepts it (probe: %v)", a, bs, err)
		}
		if errors.Is(err, ErrPermission) && len(DiagnoseRefusal(a)) == 0 {
			t.Errorf("%s refused without a diagnosis", a)
		}
	}
}

const diagChildEnv = "GOWQ_DIAG_CHILD"

// TestDiagnoseClassRTBudget runs a child as root in a new cpu cgroup with
// cpu.rt_runtime_us = 0: the kernel refuses SCHED_FIFO although
// CAP_SYS_NICE is held, and the diagnosis names the cgroup.
func TestDiagnoseClassRTBudget(t *testing.T) {
	if want := os.Getenv(diagChildEnv); want != "" {
		err := Probe(nil, &fifo1)
		if !errors.Is(err, ErrPermission) {
			t.Fatalf("SCHED_FIFO in a cgroup without an RT budget: %v, want EPERM", err)
		}
		bs := DiagnoseClass(fifo1)
		if len(bs) != 1 || bs[0].Cause != CauseCgroupRT || !strings.Contains(bs[0].Detail, want) {
			t.Fatalf("diagnosis %v, want the cgroup %s", bs, want)
		}
		if bs := DiagnoseClass(nice20); len(bs) != 0 {
			t.Errorf("nice -20 as root: %v", bs)
		}
		return
	}
	dir, v2 := testutil.NewCgroup(t, "cpu")
	if v2 {
		t.Skip("cgroup v2 has no cpu.rt_runtime_us")
	}
	if err := testutil.WriteCgroup(dir, "cpu.rt_runtime_us", "0"); err != nil {
		t.Skipf("no RT group scheduling (cpu.rt_runtime_us): %v", err)
	}
	if !HasCapSysNice() {
		t.Skip("needs CAP_SYS_NICE, so that only the cgroup refuses")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestDiagnoseClassRTBudget$", "-test.v")
	cmd.Env = append(os.Environ(), diagChildEnv+"="+dir)
	testutil.StartInCgroup(cmd, dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
