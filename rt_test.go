package wq_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/topology"
	"github.com/gowq/wq/kthread"
	"golang.org/x/sys/unix"
)

// runOn runs fn on a worker of q for cpu and returns the worker's tid.
func workerTID(t *testing.T, q *wq.Workqueue, cpu int) int {
	t.Helper()
	var tid atomic.Int32
	w := wq.NewWork(func() { tid.Store(int32(wq.Gettid())) })
	if !q.QueueOn(cpu, w) {
		t.Fatal("QueueOn returned false")
	}
	w.Flush()
	return int(tid.Load())
}

func TestRTClassPerCPU(t *testing.T) {
	requireRoot(t)
	q := mustAlloc(t, "rt-pcpu", wq.PerCPU|wq.RT, 0)
	for _, cpu := range wq.OnlineCPUs() {
		tid := workerTID(t, q, cpu)
		a, err := sched.GetAttr(tid)
		if err != nil || a.Policy != sched.PolicyFIFO || a.Priority != wq.RTPriority() {
			t.Errorf("RT worker %d: %+v %v, want SCHED_FIFO prio %d", tid, a, err, wq.RTPriority())
		}
		aff, _ := sched.Affinity(tid)
		if !slices.Equal(aff, []int{cpu}) {
			t.Errorf("RT worker on CPU %d has affinity %v", cpu, aff)
		}
		name, _ := sched.ThreadName(tid)
		if !strings.HasPrefix(name, fmt.Sprintf("kworker/%d:", cpu)) || !strings.HasSuffix(name, "F") {
			t.Errorf("RT worker name %q, want kworker/%d:NF", name, cpu)
		}
	}
}

func TestRTUnboundIsCPUScopeStrict(t *testing.T) {
	requireRoot(t)
	q := mustAlloc(t, "rt-unbound", wq.Unbound|wq.RT, 0)
	for _, a := range []struct{ name, want string }{{"affinity_scope", "cpu"}, {"affinity_strict", "1"}, {"policy", "fifo"}} {
		if got, err := q.Attr(a.name); err != nil || got != a.want {
			t.Errorf("Attr(%s) = %q, %v; want %q", a.name, got, err, a.want)
		}
	}
	for _, cpu := range wq.OnlineCPUs() {
		tid := workerTID(t, q, cpu)
		aff, _ := sched.Affinity(tid)
		if !slices.Equal(aff, []int{cpu}) {
			t.Errorf("strict cpu-scope worker for CPU %d has affinity %v", cpu, aff)
		}
		if a, _ := sched.GetAttr(tid); a.Policy != sched.PolicyFIFO {
			t.Errorf("worker %d policy %v", tid, a.Policy)
		}
	}
	for _, name := range []string{"nice", "affinity_scope", "affinity_strict", "policy"} {
		if err := q.SetAttr(name, "0"); !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("SetAttr(%s) on an RT queue = %v, want ErrReadOnly", name, err)
		}
	}
}

// TestPolicySwitch: switching a running queue's policy sends new items to a
// pool of the new class while the running item finishes on its old worker.
func TestPolicySwitch(t *testing.T) {
	requireRoot(t)
	q := mustAlloc(t, "switch", wq.PerCPU, 0)
	release := make(chan struct{})
	var oldTID atomic.Int32
	var oldPolicyAtEnd atomic.Int32
	running := wq.NewWork(func() {
		oldTID.Store(int32(wq.Gettid()))
		<-release
		a, _ := sched.GetAttr(0)
		oldPolicyAtEnd.Store(int32(a.Policy))
	})
	q.QueueOn(0, running)
	waitFor(t, "the item to start", func() bool { return oldTID.Load() != 0 })
	if err := q.SetPolicy(wq.PolicyFIFO); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Attr("policy"); got != "fifo" {
		t.Errorf("policy attr %q after SetPolicy(fifo)", got)
	}
	tid := workerTID(t, q, 0)
	if a, _ := sched.GetAttr(tid); a.Policy != sched.PolicyFIFO {
		t.Errorf("new item ran on worker %d with policy %v, want SCHED_FIFO", tid, a.Policy)
	}
	close(release)
	running.Flush()
	if sched.Policy(oldPolicyAtEnd.Load()) != sched.PolicyNormal {
		t.Errorf("the item running at the switch ended on policy %v, want its old SCHED_OTHER worker", sched.Policy(oldPolicyAtEnd.Load()))
	}
	if err := q.SetAttr("policy", "bogus"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetAttr(policy, bogus) = %v", err)
	}
	if got, _ := q.Attr("policy"); got != "fifo" {
		t.Errorf("a rejected write changed policy to %q", got)
	}
	// The process-wide HighPri switch.
	if err := wq.SetHighPriPolicy(wq.PolicyFIFO); err != nil {
		t.Fatal(err)
	}
	defer wq.SetHighPriPolicy(wq.PolicyHighPri)
	hq := mustAlloc(t, "switch-hp", wq.PerCPU|wq.HighPri, 0)
	if a, _ := sched.GetAttr(workerTID(t, hq, 0)); a.Policy != sched.PolicyFIFO {
		t.Errorf("HighPri queue with the FIFO switch: worker policy %v", a.Policy)
	}
}

// TestPrivilegeErrors runs in a child as user nobody (no CAP_SYS_NICE,
// RLIMIT_RTPRIO 0): RT and HighPri allocation fail with ErrPermission and a
// text that says how to grant it; AllowRTFallback degrades visibly.
func TestPrivilegeErrors(t *testing.T) {
	if os.Getenv("GOWQ_PRIV_CHILD") == "1" {
		privChild()
		return
	}
	requireRoot(t)
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestPrivilegeErrors$", "-test.v"}, "GOWQ_PRIV_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PRIV-CHILD-OK") {
		t.Fatalf("child as nobody: %v\n%s", err, out)
	}
}

func privChild() {
	fail := func(format string, a ...any) {
		fmt.Printf("PRIV-CHILD-FAIL: "+format+"\n", a...)
		os.Exit(1)
	}
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_RTPRIO, &rl)
	if rl.Cur > 0 {
		fmt.Println("RLIMIT_RTPRIO is set for nobody here; nothing to check")
		fmt.Println("PRIV-CHILD-OK")
		return
	}
	_, err := wq.Alloc("rt", wq.PerCPU|wq.RT, 0)
	if !errors.Is(err, wq.ErrPermission) || !strings.Contains(err.Error(), "CAP_SYS_NICE") || !strings.Contains(err.Error(), "ulimit -r") {
		fail("Alloc(RT) as nobody: %v", err)
	}
	if _, err := wq.Alloc("hp", wq.PerCPU|wq.HighPri, 0); !errors.Is(err, wq.ErrPermission) {
		fail("Alloc(HighPri) as nobody: %v", err)
	}
	q, err := wq.Alloc("rt-fb", wq.PerCPU|wq.RT, 0, wq.AllowRTFallback())
	if err != nil {
		fail("Alloc with fallback: %v", err)
	}
	st := q.Stats()
	if !st.Fallback || st.Policy != wq.PolicyNormal || q.Flags()&(wq.RT|wq.HighPri) != 0 {
		fail("fallback not visible: %+v flags %v", st, q.Flags())
	}
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	q.Queue(w)
	w.Flush()
	if !ran.Load() {
		fail("fallback queue did not run the item")
	}
	q.Destroy()
	fmt.Println("PRIV-CHILD-OK")
}

// TestHotplugInjected takes CPU 1 away through an injected topology: the
// per-CPU pool of CPU 1 is disassociated (its workers may run on CPU 0),
// its pending item still runs, and it is rebound when the CPU returns.
func TestHotplugInjected(t *testing.T) {
	cpu, rest, real, reduced := hotplugTopologies(t)
	var changes atomic.Int32
	cancel := wq.OnCPUChange(func([]int) { changes.Add(1) })
	defer cancel()

	q := mustAlloc(t, "hotplug", wq.PerCPU, 1)
	release := make(chan struct{})
	var firstCPU atomic.Int32
	firstCPU.Store(-1)
	blocker := wq.NewWork(func() { firstCPU.Store(int32(wq.GetCPU())); <-release })
	q.QueueOn(cpu, blocker)
	waitFor(t, "the blocker to start", func() bool { return firstCPU.Load() >= 0 })
	var ranOn atomic.Int32
	ranOn.Store(-1)
	pending := wq.NewWork(func() { ranOn.Store(int32(wq.GetCPU())) })
	q.QueueOn(cpu, pending) // waits behind max_active 1

	if err := wq.SetTopologySource(&topology.StaticSource{T: reduced}); err != nil {
		t.Fatal(err)
	}
	if changes.Load() == 0 {
		t.Error("OnCPUChange subscriber not called")
	}
	if got := wq.OnlineCPUs(); slices.Contains(got, cpu) {
		t.Fatalf("OnlineCPUs %v still has CPU %d", got, cpu)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, rest) {
		t.Errorf("pool of offline CPU %d: CPUs %v, want %v (disassociated)", cpu, got, rest)
	}
	close(release)
	pending.Flush()
	if c := int(ranOn.Load()); !slices.Contains(rest, c) {
		t.Errorf("pending item of offline CPU %d ran on CPU %d, want one of %v", cpu, c, rest)
	}
	// The CPU comes back: the pool is bound to it again.
	if err := wq.SetTopologySource(&topology.StaticSource{T: real}); err != nil {
		t.Fatal(err)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, []int{cpu}) {
		t.Errorf("pool after CPU %d returned: CPUs %v", cpu, got)
	}
	tid := workerTID(t, q, cpu)
	if aff, _ := sched.Affinity(tid); !slices.Equal(aff, []int{cpu}) {
		t.Errorf("worker %d after rebind has affinity %v, want [%d]", tid, aff, cpu)
	}
}

// TestHotplugRealAffinity narrows the process's affinity from outside (as
// taskset -p does: the main thread's mask) and checks that Rescan sees it
// and disassociates the per-CPU pool, and rebinds it once restored.
func TestHotplugRealAffinity(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	cpu := online[len(online)-1]
	orig, err := sched.Affinity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	q := mustAlloc(t, "hotplug-real", wq.PerCPU, 0)
	workerTID(t, q, cpu) // make the pool's workers exist
	t.Cleanup(func() {
		_ = sched.SetAffinity(os.Getpid(), orig)
		_ = wq.Rescan()
	})
	if err := sched.SetAffinity(os.Getpid(), online[:len(online)-1]); err != nil {
		t.Skipf("cannot narrow the process affinity: %v", err)
	}
	if err := wq.Rescan(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(wq.OnlineCPUs(), cpu) {
		t.Fatalf("Rescan did not notice CPU %d leaving the process's affinity", cpu)
	}
	if got := q.PoolCPUs(cpu); slices.Contains(got, cpu) {
		t.Errorf("pool of CPU %d still bound to it: %v", cpu, got)
	}
	ran := make(chan int, 1)
	q.QueueOn(cpu, wq.NewWork(func() { ran <- wq.GetCPU() }))
	select {
	case c := <-ran:
		if c == cpu {
			t.Errorf("item for the departed CPU %d ran on it", cpu)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("item queued on the departed CPU was stranded")
	}
	_ = sched.SetAffinity(os.Getpid(), orig)
	if err := wq.Rescan(); err != nil {
		t.Fatal(err)
	}
	if got := q.PoolCPUs(cpu); !slices.Equal(got, []int{cpu}) {
		t.Errorf("pool after restore: %v", got)
	}
}

// TestRTHogReport: an RT item that spins past the RT hog threshold is
// reported once, as an RT hog.
func TestRTHogReport(t *testing.T) {
	requireRoot(t)
	if err := wq.SetRTHogThresh(30 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer wq.SetRTHogThresh(100 * time.Millisecond)
	var reports atomic.Int32
	var msg atomic.Value
	wq.SetLockupHook(func(r wq.LockupReport) {
		if r.RTHog {
			msg.Store(r.Message) // before the count, which the item waits for
			reports.Add(1)
		}
	})
	defer wq.SetLockupHook(nil)
	q := mustAlloc(t, "rt-hog", wq.Unbound|wq.RT, 0)
	done := make(chan struct{})
	// Spin (bounded by 5 s of CPU time) until the watchdog reports it.
	q.Queue(wq.NewWork(func() {
		s := threadCPU()
		for reports.Load() == 0 && threadCPU()-s < 5*time.Second {
		}
		close(done)
	}))
	<-done
	q.Flush()
	if n := reports.Load(); n != 1 {
		t.Fatalf("%d RT hog reports, want 1", n)
	}
	if m, _ := msg.Load().(string); !strings.Contains(m, "without sleeping") || !strings.Contains(m, "TestRTHogReport") {
		t.Errorf("report %q", m)
	}
	if err := wq.SetRTHogThresh(-1); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetRTHogThresh(-1) = %v", err)
	}
}

// zeroRTCgroup creates a cgroup v1 cpu group with cpu.rt_runtime_us = 0,
// or skips saying why not.
func zeroRTCgroup(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	dir, v2 := testutil.NewCgroup(t, "cpu")
	if v2 {
		t.Skip("cgroup v2: no cpu.rt_runtime_us (the cgroup v2 case is covered by internal/sched's fixtures)")
	}
	if err := testutil.WriteCgroup(dir, "cpu.rt_runtime_us", "0"); err != nil {
		t.Skipf("no RT group scheduling (cpu.rt_runtime_us): %v", err)
	}
	return dir
}

// ownCPUCgroup is the process's cpu cgroup path as /proc/self/cgroup
// shows it (the tail of the directory under the controller's mount).
func ownCPUCgroup(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) == 3 && strings.Contains(","+f[1]+",", ",cpu,") {
			return f[2]
		}
	}
	t.Fatal("no cpu cgroup in /proc/self/cgroup")
	return ""
}

func says(t *testing.T, what string, err error, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// flushWithin waits for w's flush, failing the test after a generous
// deadline instead of hanging.
func flushWithin(t *testing.T, what string, ws ...*wq.Work) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		for _, w := range ws {
			w.Flush()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s: items stalled", what)
	}
}

// TestRTRefusedInZeroBudgetCgroup runs as root in a cpu cgroup whose
// cpu.rt_runtime_us is 0: CAP_SYS_NICE is there, the kernel refuses
// SCHED_FIFO, and every refusal names the cgroup and the fix; with
// AllowRTFallback the queue works and Stats says why it fell back.
func TestRTRefusedInZeroBudgetCgroup(t *testing.T) {
	if !inAttrChild() {
		attrChild(t, "TestRTRefusedInZeroBudgetCgroup", false, nil, zeroRTCgroup(t))
		return
	}
	cg := ownCPUCgroup(t)
	q, err := wq.Alloc("rtdiag-rt", wq.PerCPU|wq.RT, 0)
	if !errors.Is(err, wq.ErrPermission) {
		if q != nil {
			q.Destroy()
		}
		t.Fatalf("Alloc(PerCPU|RT) in a cgroup without RT budget: %v, want ErrPermission", err)
	}
	says(t, "Alloc(RT)", err, "cpu.rt_runtime_us is 0 in cgroup", cg, "echo 100000 >", "--cpu-rt-runtime")
	if strings.Contains(err.Error(), "ulimit -r") {
		t.Errorf("Alloc(RT) as root blames the rlimit: %v", err)
	}
	err = wq.SetRTPriority(50)
	if !errors.Is(err, wq.ErrPermission) {
		t.Fatalf("SetRTPriority(50): %v", err)
	}
	says(t, "SetRTPriority", err, cg)
	err = wq.SetHighPriPolicy(wq.PolicyFIFO)
	if !errors.Is(err, wq.ErrPermission) {
		t.Fatalf("SetHighPriPolicy(fifo): %v", err)
	}
	says(t, "SetHighPriPolicy", err, cg)
	uq := mustAlloc(t, "rtdiag-unbound", wq.Unbound, 0)
	err = uq.SetPolicy(wq.PolicyFIFO)
	if !errors.Is(err, wq.ErrPermission) {
		t.Fatalf("SetPolicy(fifo): %v", err)
	}
	says(t, "SetPolicy", err, cg)

	fq, err := wq.Alloc("rtdiag-fallback", wq.PerCPU|wq.RT, 0, wq.AllowRTFallback())
	if err != nil {
		t.Fatalf("Alloc(RT, AllowRTFallback): %v", err)
	}
	t.Cleanup(fq.Destroy)
	var ran atomic.Int32
	ws := make([]*wq.Work, 4)
	for i := range ws {
		ws[i] = wq.NewWork(func() { ran.Add(1) })
		fq.Queue(ws[i])
	}
	flushWithin(t, "fallback queue", ws...)
	if ran.Load() != int32(len(ws)) {
		t.Errorf("%d of %d items ran", ran.Load(), len(ws))
	}
	st := fq.Stats()
	if !st.Fallback || !strings.Contains(st.FallbackReason, cg) || !strings.HasPrefix(st.FallbackReason, sched.CauseCgroupRT) {
		t.Errorf("Stats after fallback: Fallback %v, FallbackReason %q; want the cgroup %s", st.Fallback, st.FallbackReason, cg)
	}

	wk, err := kthread.CreateWorker("rtdiag-kw", kthread.WithFIFOLow())
	if !errors.Is(err, kthread.ErrPermission) {
		if wk != nil {
			wk.Destroy()
		}
		t.Fatalf("kthread.CreateWorker(WithFIFOLow): %v, want ErrPermission", err)
	}
	says(t, "kthread.CreateWorker", err, cg, "cpu.rt_runtime_us")
	wk, err = kthread.CreateWorker("rtdiag-kw2")
	if err != nil {
		t.Fatal(err)
	}
	defer wk.Destroy()
	err = kthread.SetFIFO(wk)
	if !errors.Is(err, kthread.ErrPermission) {
		t.Fatalf("kthread.SetFIFO: %v", err)
	}
	says(t, "kthread.SetFIFO", err, cg)
}

// rtdiagUnprivEnv tells the unprivileged child which cause to expect.
const rtdiagUnprivEnv = "GOWQ_RTDIAG_EXPECT"

// TestRTRefusedUnprivileged runs as nobody (no CAP_SYS_NICE): with
// RLIMIT_RTPRIO 0 (under `prlimit --rtprio=0`) the cause is CAP_SYS_NICE;
// with RLIMIT_RTPRIO 5 (raised by root before the user switch) priority 1
// works and 50 is refused for RLIMIT_RTPRIO.
func TestRTRefusedUnprivileged(t *testing.T) {
	if inAttrChild() {
		rtUnprivChild(t, os.Getenv(rtdiagUnprivEnv))
		return
	}
	requireRoot(t)
	t.Run("rtprio=0", func(t *testing.T) {
		t.Setenv(rtdiagUnprivEnv, "0")
		attrChild(t, "TestRTRefusedUnprivileged", true, []string{"prlimit", "--rtprio=0"}, "")
	})
	t.Run("rtprio=5", func(t *testing.T) {
		var old unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_RTPRIO, &old); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setrlimit(unix.RLIMIT_RTPRIO, &unix.Rlimit{Cur: 5, Max: 5}); err != nil {
			t.Skipf("cannot raise RLIMIT_RTPRIO to 5 for the child (hard limit %d; raising it needs CAP_SYS_RESOURCE): %v", old.Max, err)
		}
		defer unix.Setrlimit(unix.RLIMIT_RTPRIO, &old)
		t.Setenv(rtdiagUnprivEnv, "5")
		attrChild(t, "TestRTRefusedUnprivileged", true, nil, "")
	})
}

func rtUnprivChild(t *testing.T, limit string) {
	if sched.HasCapSysNice() {
		t.Fatal("the unprivileged child holds CAP_SYS_NICE")
	}
	var rl unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_RTPRIO, &rl)
	if strconv.FormatUint(rl.Cur, 10) != limit {
		t.Fatalf("RLIMIT_RTPRIO is %d, want %s", rl.Cur, limit)
	}
	if limit == "0" {
		q, err := wq.Alloc("rtdiag-nobody", wq.PerCPU|wq.RT, 0)
		if !errors.Is(err, wq.ErrPermission) {
			if q != nil {
				q.Destroy()
			}
			t.Fatalf("Alloc(RT) as nobody with RLIMIT_RTPRIO 0: %v", err)
		}
		says(t, "Alloc(RT)", err, "CAP_SYS_NICE:", "RLIMIT_RTPRIO is 0", "setcap cap_sys_nice+ep", "LimitRTPRIO=")
		fq, err := wq.Alloc("rtdiag-nobody-fb", wq.PerCPU|wq.RT, 0, wq.AllowRTFallback())
		if err != nil {
			t.Fatal(err)
		}
		defer fq.Destroy()
		if st := fq.Stats(); !st.Fallback || !strings.HasPrefix(st.FallbackReason, sched.CauseCap+":") {
			t.Errorf("fallback as nobody: %v %q", st.Fallback, st.FallbackReason)
		}
		// Catches: a reason that names only SCHED_FIFO when the queue fell
		// past HighPri to the normal class.
		if st := fq.Stats(); st.Policy == wq.PolicyNormal && !strings.Contains(st.FallbackReason, "HighPri (nice -20) refused too: ") {
			t.Errorf("RT fell to normal as nobody, but FallbackReason does not say why not HighPri: %q", st.FallbackReason)
		}
		w := wq.NewWork(func() {})
		fq.Queue(w)
		flushWithin(t, "fallback queue as nobody", w)
		_, err = kthread.CreateWorker("rtdiag-kw", kthread.WithFIFOLow())
		if !errors.Is(err, kthread.ErrPermission) {
			t.Fatalf("kthread.CreateWorker(WithFIFOLow) as nobody: %v", err)
		}
		says(t, "kthread.CreateWorker", err, "CAP_SYS_NICE:", "RLIMIT_RTPRIO is 0")
		return
	}
	q, err := wq.Alloc("rtdiag-rtprio", wq.PerCPU|wq.RT, 0) // priority 1 <= 5
	if err != nil {
		t.Fatalf("Alloc(RT) at priority 1 with RLIMIT_RTPRIO 5: %v", err)
	}
	q.Destroy()
	err = wq.SetRTPriority(50)
	if !errors.Is(err, wq.ErrPermission) {
		t.Fatalf("SetRTPriority(50) with RLIMIT_RTPRIO 5: %v", err)
	}
	says(t, "SetRTPriority(50)", err, "RLIMIT_RTPRIO:", "RLIMIT_RTPRIO is 5", "ulimit -r 50")
	if wq.RTPriority() != 1 {
		t.Errorf("refused SetRTPriority changed it to %d", wq.RTPriority())
	}
}

const rtdiagMoveEnv = "GOWQ_RTDIAG_MOVE"

// TestRTMovedAfterAlloc: an RT MemReclaim queue is allocated with an RT
// budget, then the process's threads are moved into a cpu cgroup without
// one. (The kernel refuses to move an RT thread there, so the existing RT
// workers, rescuer and monitor stay; every other thread, and so every
// thread created from now on, goes in.) New workers then fail: the
// failure is counted in Stats and reported to the error handler with
// the cgroup named, and the queued items still all run.
func TestRTMovedAfterAlloc(t *testing.T) {
	if !inAttrChild() {
		dir := zeroRTCgroup(t)
		t.Setenv(rtdiagMoveEnv, dir)
		attrChild(t, "TestRTMovedAfterAlloc", false, nil, "")
		return
	}
	dir := os.Getenv(rtdiagMoveEnv)
	var mu sync.Mutex
	var reported []string
	wq.SetErrorHandler(func(op, fn string, err error) {
		if op == "create_worker" {
			mu.Lock()
			reported = append(reported, err.Error())
			mu.Unlock()
		}
	})
	defer wq.SetErrorHandler(nil)
	q := mustAlloc(t, "rtdiag-moved", wq.PerCPU|wq.RT|wq.MemReclaim, 0)

	// Move every thread that is not RT (the kernel would refuse those).
	for range 3 {
		tids, _ := os.ReadDir("/proc/self/task")
		for _, d := range tids {
			tid, _ := strconv.Atoi(d.Name())
			if a, err := sched.GetAttr(tid); err == nil && a.Policy == sched.PolicyNormal {
				_ = testutil.WriteCgroup(dir, "tasks", d.Name())
			}
		}
	}
	rel := strings.TrimPrefix(dir, filepath.Dir(dir)) // "/gowq-test-..."

	release := make(chan struct{})
	var ran atomic.Int32
	ws := make([]*wq.Work, 6)
	for i := range ws {
		ws[i] = wq.NewWork(func() { <-release; ran.Add(1) })
		q.QueueOn(0, ws[i])
	}
	deadline := time.Now().Add(time.Minute)
	for q.Stats().CreateErrors == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	st := q.Stats()
	t.Logf("after the move: %d creation failure(s), latest: %s", st.CreateErrors, st.CreateError)
	close(release)
	flushWithin(t, "items after the move", ws...)
	if ran.Load() != int32(len(ws)) {
		t.Errorf("%d of %d items ran", ran.Load(), len(ws))
	}
	if st.CreateErrors == 0 {
		t.Fatalf("no worker creation failed after the move: %+v", st)
	}
	if !strings.Contains(st.CreateError, rel) || !strings.Contains(st.CreateError, "cpu.rt_runtime_us is 0") {
		t.Errorf("Stats().CreateError %q does not name the cgroup %s", st.CreateError, rel)
	}
	deadline = time.Now().Add(time.Minute)
	for {
		mu.Lock()
		r := fmt.Sprint(reported)
		mu.Unlock()
		if strings.Contains(r, rel) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the error handler got no report naming the cgroup %s: %s", rel, r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
