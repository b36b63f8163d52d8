package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/internal/testutil"
)

// fixture copies testdata/name into a fresh directory (tests rewrite
// files in it) and returns an Env reading it as process 4242.
func fixture(t *testing.T, name string, slack int64) (Env, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return Env{
		Root:       dir,
		PID:        4242,
		Sleep:      func(time.Duration) {},
		TimerSlack: func() (int64, error) { return slack, nil },
		Diagnose:   func(labsys.ThreadAttr) []labsys.ClassBlocker { return nil },
	}, dir
}

func byID(r Report) map[string]Check {
	m := map[string]Check{}
	for _, c := range r.Checks {
		m[c.ID] = c
	}
	return m
}

// want is what one check must report: its status and a piece of its value.
type want struct {
	status Status
	value  string
}

func expect(t *testing.T, r Report, wants map[string]want) {
	t.Helper()
	got := byID(r)
	for id, w := range wants {
		c, ok := got[id]
		if !ok {
			t.Errorf("%s: missing", id)
			continue
		}
		if c.Status != w.status || !strings.Contains(c.Value, w.value) {
			t.Errorf("%s: %s %q, want %s and a value containing %q", id, c.Status, c.Value, w.status, w.value)
		}
		if c.Error != "" {
			t.Errorf("%s: error %s", id, c.Error)
		}
		if c.Why == "" {
			t.Errorf("%s: no why", id)
		}
		if (c.Status != OK) != (c.Remedy != "") {
			t.Errorf("%s: status %s with remedy %q (a remedy exactly when not OK)", id, c.Status, c.Remedy)
		}
	}
}

func checkCounts(t *testing.T, r Report) {
	t.Helper()
	n := map[Status]int{}
	for _, c := range r.Checks {
		n[c.Status]++
	}
	if n[OK] != r.OK || n[Warn] != r.Warn || n[Fail] != r.Fail || r.OK+r.Warn+r.Fail != len(r.Checks) {
		t.Errorf("counts %d/%d/%d do not match the checks %v", r.OK, r.Warn, r.Fail, n)
	}
	if r.Failed() != (r.Fail > 0) {
		t.Errorf("Failed() = %v with %d FAIL", r.Failed(), r.Fail)
	}
}

func TestGoodRTBox(t *testing.T) {
	env, _ := fixture(t, "good", 50_000)
	r := Run(context.Background(), env)
	checkCounts(t, r)
	if len(r.Checks) != len(IDs) {
		t.Fatalf("%d checks, want %d", len(r.Checks), len(IDs))
	}
	for i, c := range r.Checks {
		if c.ID != IDs[i] {
			t.Errorf("check %d is %s, want %s", i, c.ID, IDs[i])
		}
	}
	expect(t, r, map[string]want{
		"cap-sys-nice":     {OK, "held"},
		"rlimit-rtprio":    {OK, "not consulted: CAP_SYS_NICE held"},
		"rlimit-nice":      {OK, "not consulted"},
		"rlimit-memlock":   {OK, "unlimited"},
		"cgroup-rt-budget": {OK, "cgroup /rt.slice: cpu.rt_runtime_us 500000 of cpu.rt_period_us 1000000"},
		"seccomp":          {OK, "none"},
		"rt-throttle":      {OK, "stopped after 950 ms of each 1000 ms"},
		// isolcpus=0 after "--" belongs to init, not the kernel.
		"cpu-isolation":    {OK, "isolated CPUs 2-3 (isolcpus=managed_irq,domain,2-3; nohz_full=2-3; rcu_nocbs=2-3"},
		"cpu-affinity":     {OK, "CPUs 2-3 of 0-3 online"},
		"gomaxprocs":       {OK, "not set in the environment"},
		"cpufreq-governor": {OK, "performance on CPU 0,1,2,3"},
		"cpuidle":          {OK, "kept out by a PM QoS request of 0 us"},
		"pm-qos":           {OK, "held"},
		"steal":            {OK, "0.0%"},
		"timer-slack":      {OK, "50000 ns"},
		"thp":              {OK, "enabled=madvise defrag=madvise"},
		"irqbalance":       {OK, "not running"},
		// IRQ 24 is effective on CPU 0 only, 25 on CPU 1: none on 2-3,
		// although their smp_affinity_list allows 0-3.
		"irq-affinity": {OK, "none of 2 IRQs on the isolated CPUs 2-3"},
		"tracefs":      {OK, "available at /sys/kernel/tracing"},
	})
	if r.Failed() || r.Warn != 0 {
		t.Errorf("good box: %s", r.Summary())
	}
}

// TestBadBox: every problem at once, each found by its check.
func TestBadBox(t *testing.T) {
	env, dir := fixture(t, "bad", 4_000_000)
	slept := 0
	env.Sleep = func(d time.Duration) {
		slept++
		if d != StealInterval {
			t.Errorf("sleep %v, want %v", d, StealInterval)
		}
		// 200 ticks later, 10 of them stolen: 5%.
		b := "cpu  1100 0 540 8050 10 0 5 10 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\nbtime 1700000000\n"
		if err := os.WriteFile(filepath.Join(dir, "proc/stat"), []byte(b), 0o644); err != nil {
			t.Error(err)
		}
	}
	r := Run(context.Background(), env)
	checkCounts(t, r)
	if slept != 1 {
		t.Errorf("slept %d times, want 1", slept)
	}
	expect(t, r, map[string]want{
		"cap-sys-nice":     {Warn, "not held"},
		"rlimit-rtprio":    {Fail, "0"},
		"rlimit-nice":      {Warn, "lowest nice reachable: 20"},
		"rlimit-memlock":   {Warn, "8388608 bytes"},
		"cgroup-rt-budget": {Fail, "cgroup /docker/0123abcd: cpu.rt_runtime_us 0"},
		"seccomp":          {Warn, "filter mode"},
		"rt-throttle":      {Warn, "-1 of 1000000 us (no throttling)"},
		"cpu-isolation":    {OK, "isolated CPUs 1 (isolcpus=1)"},
		"cpu-affinity":     {OK, "CPUs 0-1 of 0-1 online"},
		"gomaxprocs":       {Warn, "GOMAXPROCS=1 for 2 CPUs (fewer Ps than CPUs"},
		"cpufreq-governor": {Warn, "powersave on CPU 0; schedutil on CPU 1"},
		"cpuidle":          {Warn, "deepest enabled exit latency 133 us"},
		"pm-qos":           {Warn, "no request held (deepest enabled idle state exits in 133 us)"},
		"steal":            {Warn, "5.0% over 200ms"},
		"timer-slack":      {Warn, "4000000 ns"},
		"thp":              {Warn, "enabled=always defrag=always"},
		"irqbalance":       {Warn, "running (pid 777)"},
		"irq-affinity":     {Warn, "2 of 3 IRQs may fire on the isolated CPUs 1: 25 26"},
		"tracefs":          {Warn, "not available"},
	})
	c := byID(r)["cgroup-rt-budget"]
	if !strings.Contains(c.Remedy, "echo 950000 > /sys/fs/cgroup/cpu,cpuacct/docker/0123abcd/cpu.rt_runtime_us") {
		t.Errorf("cgroup remedy does not name the file as the process sees it: %s", c.Remedy)
	}
	if s := r.Summary(); s != "doctor: 2 OK, 15 WARN, 2 FAIL — run `wqlab doctor` for details (FAIL: RLIMIT_RTPRIO, cgroup RT budget)" {
		t.Errorf("summary %q", s)
	}
}

// TestVariants changes one thing of the bad box at a time for the cases
// one tree cannot hold together.
func TestVariants(t *testing.T) {
	cases := []struct {
		name  string
		edit  map[string]string // file -> new content ("" removes it, or the tree)
		wants map[string]want
	}{
		{"no isolation", map[string]string{"proc/cmdline": "root=/dev/sda1 quiet"}, map[string]want{
			"cpu-isolation": {Warn, "none"},
			"irq-affinity":  {OK, "3 of 3 IRQs may fire on this process's CPUs 0-1 (no isolated CPUs"},
		}},
		{"one CPU", map[string]string{"proc/cmdline": "quiet"}, map[string]want{
			"cpu-affinity": {Warn, "CPUs 0 of 0-1 online (one CPU"},
		}},
		{"outside the isolated CPUs", map[string]string{"proc/cmdline": "isolcpus=domain,2-3", "sys/devices/system/cpu/online": "0-3"}, map[string]want{
			"cpu-affinity": {Warn, "CPUs 0-1 of 0-3 online (none of the isolated CPUs 2-3)"},
			"irq-affinity": {OK, "no isolated CPUs to keep them off"},
		}},
		{"RT budget 0", map[string]string{"proc/sys/kernel/sched_rt_runtime_us": "0"}, map[string]want{
			"rt-throttle": {Fail, "(RT threads get no CPU time)"},
		}},
		{"RT budget small", map[string]string{"proc/sys/kernel/sched_rt_runtime_us": "300000"}, map[string]want{
			"rt-throttle": {Warn, "stopped for 700000 us of every period"},
		}},
		{"rlimits grant", map[string]string{}, map[string]want{
			"rlimit-rtprio": {OK, "99"},
			"rlimit-nice":   {OK, "40"},
		}},
		{"strict seccomp", map[string]string{}, map[string]want{
			"seccomp": {Fail, "strict mode"},
		}},
		{"not applicable", map[string]string{
			"sys/devices/system/cpu/cpu0": "", "sys/devices/system/cpu/cpu1": "",
			"dev": "", "proc/irq": "", "sys/kernel/mm": "", "proc/sys": "", "sys/fs": "",
		}, map[string]want{
			"cpufreq-governor": {OK, "not applicable"},
			"cpuidle":          {OK, "not applicable"},
			"pm-qos":           {OK, "not applicable"},
			"irq-affinity":     {OK, "not applicable"},
			"thp":              {OK, "not applicable"},
			"cgroup-rt-budget": {OK, "not applicable"},
			"rt-throttle":      {Warn, "not applicable"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, dir := fixture(t, "bad", 50_000)
			for f, v := range tc.edit {
				p := filepath.Join(dir, f)
				if v == "" {
					if err := os.RemoveAll(p); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			edit := func(file, old, new string) {
				p := filepath.Join(dir, file)
				b, err := os.ReadFile(p)
				if err != nil || !strings.Contains(string(b), old) {
					t.Fatalf("%s lacks %q: %v", file, old, err)
				}
				if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			switch tc.name {
			case "one CPU":
				edit("proc/4242/status", "Cpus_allowed_list:\t0-1", "Cpus_allowed_list:\t0")
			case "rlimits grant":
				edit("proc/4242/limits", "Max realtime priority     0                    0", "Max realtime priority     99                   99")
				edit("proc/4242/limits", "Max nice priority         0                    0", "Max nice priority         40                   40")
			case "strict seccomp":
				edit("proc/4242/status", "Seccomp:\t2", "Seccomp:\t1")
			}
			r := Run(context.Background(), env)
			checkCounts(t, r)
			expect(t, r, tc.wants)
		})
	}
}

// TestDiagnoseClass: the blockers the shared diagnosis reports turn the
// check that covers them into a FAIL with the diagnosis's fix; one no
// check covers gets a row of its own.
func TestDiagnoseClass(t *testing.T) {
	env, _ := fixture(t, "good", 50_000)
	var asked []labsys.ThreadAttr
	env.Diagnose = func(a labsys.ThreadAttr) []labsys.ClassBlocker {
		asked = append(asked, a)
		return []labsys.ClassBlocker{
			{Cause: "cgroup cpu.rt_runtime_us", Detail: "cgroup /rt.slice has 0", Fix: "FIX-CGROUP"},
			{Cause: "new cause", Detail: "something", Fix: "FIX-NEW"},
		}
	}
	r := Run(context.Background(), env)
	checkCounts(t, r)
	if !slices.Contains(asked, labsys.ThreadAttr{Policy: labsys.ThreadFIFO, Priority: 1}) ||
		!slices.Contains(asked, labsys.ThreadAttr{Policy: labsys.ThreadNormal, Nice: -20}) {
		t.Errorf("asked about %v, want SCHED_FIFO 1 and nice -20", asked)
	}
	got := byID(r)
	if c := got["cgroup-rt-budget"]; c.Status != Fail || c.Remedy != "FIX-CGROUP" || !strings.Contains(c.Value, "cgroup /rt.slice has 0") {
		t.Errorf("cgroup check not merged: %+v", c)
	}
	// Reported for both classes, listed once.
	if c := got["blocker-new-cause"]; c.Status != Fail || c.Remedy != "FIX-NEW" || r.Fail != 2 {
		t.Errorf("unclaimed blocker: %+v, %d FAIL", c, r.Fail)
	}
}

func TestOutput(t *testing.T) {
	env, _ := fixture(t, "bad", 50_000)
	r := Run(context.Background(), env)
	var b bytes.Buffer
	if err := r.WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	col := strings.Index(lines[0], "CHECK")
	for _, l := range lines[1 : len(IDs)+1] {
		if len(l) < col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned at column %d: %q", col, l)
		}
	}
	for _, w := range []string{"FAIL RLIMIT_RTPRIO: 0\n  why:", "  remedy: grant CAP_SYS_NICE", "2 FAIL\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("text lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "OK irqbalance") || strings.Contains(out, "OK CPU isolation:") {
		t.Errorf("OK checks explained without verbose:\n%s", out)
	}
	b.Reset()
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Checks) != len(r.Checks) || back.Fail != r.Fail || back.Checks[1].Status != Fail {
		t.Errorf("JSON round trip: %+v", back)
	}
}

// TestRealMachine runs every check here: each must give a status and no
// reading error, whoever runs it. As root it also runs as nobody.
func TestRealMachine(t *testing.T) {
	r := Run(context.Background(), Env{})
	checkCounts(t, r)
	got := byID(r)
	for _, id := range IDs {
		c, ok := got[id]
		switch {
		case !ok:
			t.Errorf("%s: missing", id)
		case c.Status != OK && c.Status != Warn && c.Status != Fail:
			t.Errorf("%s: status %q", id, c.Status)
		case c.Error != "":
			t.Errorf("%s: %s", id, c.Error)
		}
	}
	var b bytes.Buffer
	r.WriteText(&b, true)
	t.Logf("uid %d:\n%s", os.Geteuid(), b.String())
	if os.Getenv("DOCTOR_CHILD") != "" || os.Geteuid() != 0 || testing.Short() {
		return
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestRealMachine$", "-test.v"}, "DOCTOR_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
	if !strings.Contains(string(out), "uid 65534:") {
		t.Errorf("the child did not run as nobody:\n%s", out)
	}
}
