package antagonist

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a parent that starts a burner,
// prints its pid and waits to be killed (TestChildrenDieWithParent).
const helperEnv = "GOWQ_ANTAGONIST_TEST_PARENT"

// permHelperEnv makes the test binary try privileged specs and print one
// line per attempt (TestPermissionErrorsAsNobody).
const permHelperEnv = "GOWQ_ANTAGONIST_TEST_PERM"

func TestMain(m *testing.M) {
	MaybeRunChild()
	if os.Getenv(helperEnv) == "1" {
		runParentHelper()
		return
	}
	if os.Getenv(permHelperEnv) == "1" {
		runPermissionHelper()
		return
	}
	goleak.VerifyTestMain(m)
}

func runParentHelper() {
	g, err := Burners(BurnerSpec{Jobs: 1, LoadPct: 10})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println(g.Pids()[0])
	select {} // killed by the test
}

func runPermissionHelper() {
	try := func(name string, spec HogSpec) {
		g, err := Hog(spec)
		switch {
		case err == nil:
			_ = g.Stop()
			fmt.Printf("%s: started\n", name)
		case errors.Is(err, ErrPermission) && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)):
			fmt.Printf("%s: ErrPermission: %v\n", name, err)
		default:
			fmt.Printf("%s: other error: %v\n", name, err)
		}
	}
	try("nice", HogSpec{Nice: -20})
	try("fifo", HogSpec{Policy: PolicyFIFO, Priority: 50, DutyPct: 10})
}

// livingChildren returns the pids of processes whose parent is this
// process, zombies included (a zombie is a child not reaped).
func livingChildren(t *testing.T) []int {
	t.Helper()
	procs, err := procfs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		st, err := p.Stat()
		if err == nil && st.PPID == os.Getpid() {
			out = append(out, p.PID)
		}
	}
	return out
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	return err == nil && st.State != "Z" && st.State != "X"
}

func checkNoChildren(t *testing.T) {
	t.Helper()
	if kids := livingChildren(t); len(kids) > 0 {
		t.Errorf("children left after Stop: %v", kids)
	}
}

func affinity(t *testing.T, tid int) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		t.Fatalf("sched_getaffinity(%d): %v", tid, err)
	}
	var out []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// niceOf returns the nice value of a thread; the raw getpriority system
// call returns 20-nice.
func niceOf(t *testing.T, tid int) int {
	t.Helper()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatalf("getpriority(%d): %v", tid, err)
	}
	return 20 - prio
}

func threads(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

func allowedCPUs(t *testing.T) []int {
	t.Helper()
	return affinity(t, 0)
}

// canRaisePriority reports whether this process may lower nice values.
func canRaisePriority() bool {
	return unix.Geteuid() == 0
}

func TestBurnersConsumeCPUAndStop(t *testing.T) {
	meter, err := StartLoadMeter()
	if err != nil {
		t.Fatal(err)
	}
	g, err := Burners(BurnerSpec{Jobs: 2, LoadPct: 50})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(g.Pids()); got != 2 {
		t.Fatalf("%d pids, want 2", got)
	}
	// Two jobs at 50% ask for one CPU's worth, on every allowed CPU.
	if a, on := g.Demand(); a != 1 || on != len(allowedCPUs(t)) {
		t.Errorf("Demand() = %v CPUs on %d, want 1 on %d", a, on, len(allowedCPUs(t)))
	}
	for _, pid := range g.Pids() {
		if !alive(pid) {
			t.Errorf("burner %d not running", pid)
		}
	}
	time.Sleep(time.Second)
	live := g.Usage()
	load, err := meter.Read()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := g.Stop(); err != nil { // idempotent
		t.Fatalf("second Stop: %v", err)
	}
	select {
	case <-g.Done():
	default:
		t.Error("Done not closed after Stop")
	}
	final := g.Usage()
	t.Logf("%s: live %v; final %v; load %v", g.Name(), live, final, load)

	// 2 jobs at 50% for about a second should use about 1 s of CPU; a
	// loaded machine gives less, so only demand a 5% share of that, and
	// no more than the 2 single-threaded processes can use.
	expect := 2 * 0.5 * final.Wall.Seconds()
	if got := final.CPU.Seconds(); got < 0.05*expect {
		t.Errorf("burners used %.3fs CPU, want > %.3fs", got, 0.05*expect)
	}
	if got := final.CPU.Seconds(); got > 2*final.Wall.Seconds()*1.25+0.1 {
		t.Errorf("burners used %.3fs CPU in %.3fs wall: more than 2 threads can", got, final.Wall.Seconds())
	}
	for _, p := range final.Procs {
		if !p.Exited || p.CPU <= 0 {
			t.Errorf("%s: exited=%v cpu=%v, want exited with cpu > 0", p.Label, p.Exited, p.CPU)
		}
		if alive(p.Pid) {
			t.Errorf("%s (pid %d) still alive", p.Label, p.Pid)
		}
	}
	if final.CPU < live.CPU {
		t.Errorf("final CPU %v < live CPU %v", final.CPU, live.CPU)
	}
	if len(load.PerCPU) == 0 {
		t.Error("load meter saw no CPUs")
	}
	for _, c := range load.PerCPU {
		if c.BusyPct < 0 || c.BusyPct > 100 {
			t.Errorf("cpu%d busy %.1f%% out of range", c.CPU, c.BusyPct)
		}
	}
	checkNoChildren(t)
}

func TestBurnersSettings(t *testing.T) {
	cpus := allowedCPUs(t)
	last := cpus[len(cpus)-1]
	nice := settableNice(7)
	g, err := Burners(BurnerSpec{Jobs: 2, LoadPct: 5, Mode: ModeNoop, CycleMs: 2, CPUs: []int{cpus[0], last}, SplitCPUs: true, Nice: nice})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := g.Stop(); err != nil {
			t.Error(err)
		}
		checkNoChildren(t)
	}()
	for i, pid := range g.Pids() {
		want := []int{[]int{cpus[0], last}[i]}
		for _, tid := range threads(t, pid) {
			if got := affinity(t, tid); !slices.Equal(got, want) {
				t.Errorf("burner %d thread %d affinity %v, want %v", i, tid, got, want)
			}
			if got := niceOf(t, tid); got != nice {
				t.Errorf("burner %d thread %d nice %d, want %d", i, tid, got, nice)
			}
		}
	}
}

func TestHogPinnedAndNiced(t *testing.T) {
	cpus := allowedCPUs(t)
	cpu := cpus[len(cpus)-1]
	nice := settableNice(5)
	if canRaisePriority() {
		nice = -20 // as in seed 004
	}
	g, err := Hog(HogSpec{CPU: cpu, Procs: 2, Nice: nice})
	if err != nil {
		t.Fatal(err)
	}
	pids := g.Pids()
	if len(pids) != 2 {
		t.Fatalf("pids %v, want 2", pids)
	}
	if a, on := g.Demand(); a != 2 || on != 1 { // two spinners on one CPU
		t.Errorf("Demand() = %v CPUs on %d, want 2 on 1", a, on)
	}
	for _, pid := range pids {
		for _, tid := range threads(t, pid) {
			if got := affinity(t, tid); !slices.Equal(got, []int{cpu}) {
				t.Errorf("hog %d thread %d affinity %v, want [%d]", pid, tid, got, cpu)
			}
			if got := niceOf(t, tid); got != nice {
				t.Errorf("hog %d thread %d nice %d, want %d", pid, tid, got, nice)
			}
		}
		if attr, err := unix.SchedGetAttr(pid, 0); err != nil || attr.Policy != unix.SCHED_NORMAL {
			t.Errorf("hog %d policy %+v (err %v), want SCHED_OTHER", pid, attr, err)
		}
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("hog %d alive after Stop", pid)
		}
	}
	checkNoChildren(t)
}

func TestHogRealtime(t *testing.T) {
	cpus := allowedCPUs(t)
	cpu := cpus[len(cpus)-1]
	// Half duty: safe even where RT throttling is off.
	g, err := Hog(HogSpec{CPU: cpu, Nice: 0, Policy: PolicyFIFO, Priority: 1, DutyPct: 50, PeriodMs: 10})
	if err != nil {
		if errors.Is(err, ErrPermission) {
			checkNoChildren(t)
			t.Skipf("no permission for SCHED_FIFO (need CAP_SYS_NICE or RLIMIT_RTPRIO): %v", err)
		}
		t.Fatal(err)
	}
	defer func() {
		if err := g.Stop(); err != nil {
			t.Error(err)
		}
		checkNoChildren(t)
	}()
	for _, pid := range g.Pids() {
		for _, tid := range threads(t, pid) {
			attr, err := unix.SchedGetAttr(tid, 0)
			if err != nil {
				t.Fatal(err)
			}
			if attr.Policy != unix.SCHED_FIFO || attr.Priority != 1 {
				t.Errorf("hog thread %d: policy %d priority %d, want SCHED_FIFO 1", tid, attr.Policy, attr.Priority)
			}
		}
	}
}

func TestPermissionErrorsAreReported(t *testing.T) {
	if canRaisePriority() {
		t.Skip("running as root: a negative nice cannot be refused here; the RT path is covered by TestHogRealtime")
	}
	_, err := Hog(HogSpec{CPU: allowedCPUs(t)[0], Nice: -20})
	if !errors.Is(err, ErrPermission) {
		t.Errorf("nice -20 as non-root: err = %v, want ErrPermission", err)
	}
	_, err = Hog(HogSpec{CPU: allowedCPUs(t)[0], Policy: PolicyRR, Priority: 50, DutyPct: 10})
	if err != nil && !errors.Is(err, ErrPermission) {
		t.Errorf("SCHED_RR as non-root: err = %v, want nil or ErrPermission", err)
	}
	checkNoChildren(t)
}

// TestPermissionErrorsAsNobody runs, as root, a copy of the test binary
// as user nobody, which may neither lower its nice value nor take
// SCHED_FIFO, and checks that both are refused with ErrPermission.
func TestPermissionErrorsAsNobody(t *testing.T) {
	if !canRaisePriority() {
		t.Skip("not root: cannot switch to nobody; TestPermissionErrorsAreReported covers this")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "antagonist-perm-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copyExe := filepath.Join(dir, "antagonist.test")
	if err := os.WriteFile(copyExe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyExe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), permHelperEnv+"=1", "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot run the test binary as nobody (%v): %s", err, out)
	}
	t.Logf("as nobody:\n%s", out)
	for _, name := range []string{"nice", "fifo"} {
		if !strings.Contains(string(out), name+": ErrPermission") {
			t.Errorf("%s as nobody: want ErrPermission, got:\n%s", name, out)
		}
	}
	checkNoChildren(t)
}

func TestRTThrottlingCheck(t *testing.T) {
	dir := t.TempDir()
	oldRuntime, oldPeriod := rtRuntimePath, rtPeriodPath
	t.Cleanup(func() { rtRuntimePath, rtPeriodPath = oldRuntime, oldPeriod })
	rtRuntimePath = filepath.Join(dir, "sched_rt_runtime_us")
	rtPeriodPath = filepath.Join(dir, "sched_rt_period_us")
	write := func(runtime, period string) {
		t.Helper()
		for p, v := range map[string]string{rtRuntimePath: runtime, rtPeriodPath: period} {
			if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		runtime, period string
		ok              bool
	}{
		{"950000", "1000000", true},
		{"-1", "1000000", false},
		{"1000000", "1000000", false},
		{"garbage", "1000000", false},
	}
	for _, c := range cases {
		write(c.runtime, c.period)
		err := checkRTThrottling()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrRTUnthrottled)) {
			t.Errorf("runtime %s period %s: err = %v", c.runtime, c.period, err)
		}
	}
	os.Remove(rtRuntimePath)
	if err := checkRTThrottling(); !errors.Is(err, ErrRTUnthrottled) {
		t.Errorf("missing file: err = %v, want ErrRTUnthrottled", err)
	}

	// Hog refuses an RT hog at 100% without throttling, before starting
	// anything; at 50% duty the check does not apply (not started here).
	write("-1", "1000000")
	_, err := Hog(HogSpec{CPU: allowedCPUs(t)[0], Policy: PolicyFIFO, Priority: 1})
	if !errors.Is(err, ErrRTUnthrottled) {
		t.Errorf("RT hog unthrottled: err = %v, want ErrRTUnthrottled", err)
	}
	if !strings.Contains(fmt.Sprint(err), "starve") {
		t.Errorf("error does not explain why: %v", err)
	}
	checkNoChildren(t)
}

func TestInvalidSpecs(t *testing.T) {
	bad := []BurnerSpec{
		{Jobs: -1},
		{Jobs: MaxJobs + 1},
		{LoadPct: 101},
		{LoadPct: -5},
		{Mode: "fft"},
		{Mode: ModeNoop, CycleMs: -1},
		{CycleMs: MaxCycleMs + 1},
		{Nice: 20},
		{Nice: -21},
		{CPUs: []int{-1}},
		{CPUs: []int{100000}},
		{SplitCPUs: true},
	}
	for _, s := range bad {
		if g, err := Burners(s); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Burners(%+v): err = %v, want ErrInvalidSpec", s, err)
			if g != nil {
				_ = g.Stop()
			}
		}
	}
	badHogs := []HogSpec{
		{CPU: -1},
		{CPU: 100000},
		{Procs: -1},
		{Procs: MaxHogs + 1},
		{Priority: 5},                        // priority without RT policy
		{Policy: PolicyFIFO},                 // RT without priority
		{Policy: PolicyRR, Priority: 100},    // out of range
		{Policy: Policy(6), Priority: 1},     // SCHED_DEADLINE is not offered
		{DutyPct: 101},                       // duty
		{DutyPct: 50, PeriodMs: -3},          // period
		{Nice: 42},                           // nice
		{Policy: PolicyOther, DutyPct: -100}, // duty
	}
	for _, s := range badHogs {
		if g, err := Hog(s); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Hog(%+v): err = %v, want ErrInvalidSpec", s, err)
			if g != nil {
				_ = g.Stop()
			}
		}
	}
	if _, err := Fio("x.fio", -time.Second); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Fio negative runtime: %v", err)
	}
	checkNoChildren(t)
}

func TestFioNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := Fio("../../testdata/seed-burn-8x90-qsort.fio", time.Second); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("err = %v, want ErrNotInstalled", err)
	}
}

// TestFioWithFakeBinary runs a stand-in "fio" shell script that starts a
// grandchild in its process group, and checks the runtime limit, the
// captured output and that Stop leaves nothing of the group behind.
func TestFioWithFakeBinary(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"fake fio $1\"\nsleep 60 &\necho \"grandchild $!\"\nwait\n"
	if err := os.WriteFile(filepath.Join(dir, "fio"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	job := filepath.Join(dir, "job.fio")
	if err := os.WriteFile(job, []byte("[global]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Fio(filepath.Join(dir, "missing.fio"), 0); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("missing job file: err = %v, want ErrInvalidSpec", err)
	}

	g, err := Fio(job, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Done():
	case <-time.After(30 * time.Second): // deadlock guard, not a timing check
		_ = g.Stop()
		t.Fatal("runtime limit did not end the fake fio")
	}
	if err := g.Stop(); err != nil {
		t.Errorf("Stop after runtime: %v", err)
	}
	out := g.Output()
	if !strings.Contains(out, "fake fio "+job) {
		t.Errorf("output %q lacks the fake fio line", out)
	}
	var grandchild int
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "grandchild "); ok {
			grandchild, _ = strconv.Atoi(v)
		}
	}
	if grandchild == 0 {
		t.Fatalf("no grandchild pid in %q", out)
	}
	if alive(grandchild) {
		// It may still be dying; give the kernel a moment, not a threshold.
		for i := 0; i < 100 && alive(grandchild); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(grandchild) {
			t.Errorf("grandchild %d of fake fio survived Stop", grandchild)
		}
	}
	checkNoChildren(t)
}

// TestUnexpectedExitIsReported kills a burner behind the group's back and
// expects Stop to report it.
func TestUnexpectedExitIsReported(t *testing.T) {
	g, err := Burners(BurnerSpec{Jobs: 1, LoadPct: 10})
	if err != nil {
		t.Fatal(err)
	}
	pid := g.Pids()[0]
	if err := unix.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-g.Done()
	err = g.Stop()
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Errorf("Stop after external kill: err = %v, want a report naming pid %d", err, pid)
	}
	checkNoChildren(t)
}

func TestConcurrentStop(t *testing.T) {
	g, err := Hog(HogSpec{CPU: allowedCPUs(t)[0], DutyPct: 10, PeriodMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = g.Stop() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Stop %d: %v", i, err)
		}
	}
	checkNoChildren(t)
}

// TestChildrenDieWithParent starts a parent process that starts a burner,
// kills that parent with SIGKILL, and expects the burner to die too
// (Pdeathsig).
func TestChildrenDieWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(err)
	}
	burner, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	if !alive(burner) {
		t.Errorf("burner %d not running under the helper", burner)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for i := 0; i < 500 && alive(burner); i++ { // deadlock guard: 5 s
		time.Sleep(10 * time.Millisecond)
	}
	if alive(burner) {
		_ = unix.Kill(burner, syscall.SIGKILL)
		t.Errorf("burner %d survived its parent", burner)
	}
	checkNoChildren(t)
}

func TestLoadMeterFromFiles(t *testing.T) {
	root := t.TempDir()
	stat := func(cpu0, cpu1 string) {
		t.Helper()
		// user nice system idle iowait irq softirq steal guest guest_nice
		content := "cpu  0 0 0 0 0 0 0 0 0 0\n" +
			"cpu0 " + cpu0 + "\n" +
			"cpu1 " + cpu1 + "\n" +
			"intr 0\nctxt 0\nbtime 0\nprocesses 0\nprocs_running 1\nprocs_blocked 0\nsoftirq 0 0 0 0 0 0 0 0 0 0 0\n"
		if err := os.WriteFile(filepath.Join(root, "stat"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat("100 0 0 100 0 0 0 0 0 0", "0 0 0 500 0 0 0 0 0 0")
	fs, err := procfs.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	m, err := startLoadMeterFS(fs)
	if err != nil {
		t.Fatal(err)
	}
	// cpu0: +90 user +5 nice +3 system +1 irq +1 softirq +0 steal, +0 idle
	// -> 100% busy. cpu1: +10 user +20 guest (not counted twice) +10 steal,
	// +70 idle +10 iowait -> 20/100 busy.
	stat("190 5 3 100 0 1 1 0 0 0", "10 0 0 570 10 0 0 10 20 0")
	l, err := m.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(l.PerCPU) != 2 || l.PerCPU[0].CPU != 0 || l.PerCPU[1].CPU != 1 {
		t.Fatalf("PerCPU = %+v", l.PerCPU)
	}
	if got := l.PerCPU[0].BusyPct; got != 100 {
		t.Errorf("cpu0 busy %.3f%%, want 100%%", got)
	}
	if got := l.PerCPU[1].BusyPct; got < 19.999 || got > 20.001 {
		t.Errorf("cpu1 busy %.3f%%, want 20%%", got)
	}
	if got := l.AllPct; got < 59.999 || got > 60.001 {
		t.Errorf("all busy %.3f%%, want 60%%", got)
	}
	if !strings.Contains(l.String(), "cpu1 20.0%") {
		t.Errorf("String() = %q", l.String())
	}
}

// BenchmarkQsortRound measures one busy chunk of a ModeQsort burner (fio's
// do_qsort); in steady state the data is already sorted, as in fio.
func BenchmarkQsortRound(b *testing.B) {
	data := newQsortData()
	qsortRound(data)
	for b.Loop() {
		qsortRound(data)
	}
}
