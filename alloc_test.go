package wq_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/kthread"
	"golang.org/x/sys/unix"
)

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

// TestAllocRefusesPrivateAndUnknownFlags catches Alloc and AllocOrdered
// accepting a bit that is not an exported flag (the private ordered bit
// built a per-CPU queue that called itself ordered and kept no order).
func TestAllocRefusesPrivateAndUnknownFlags(t *testing.T) {
	bad := []wq.Flags{
		wq.Flags(1 << 9),            // the private ordered bit
		wq.Flags(1<<9) | wq.Unbound, // with a valid flag
		wq.Flags(1 << 10),           // the first unused bit
		wq.Flags(1 << 31),           // the top bit
		wq.Flags(1<<9) | wq.PerCPU | wq.Sysfs,
	}
	for _, f := range bad {
		if q, err := wq.Alloc("flags-bad", f, 8); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("Alloc(%v) = %v, want ErrInvalidFlags", f, err)
		}
		if q, err := wq.AllocOrdered("flags-bad-ord", f&^wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("AllocOrdered(%v) = %v, want ErrInvalidFlags", f&^wq.PerCPU, err)
		}
	}
	// Every exported flag alone is still accepted (RT may need privileges).
	for _, f := range []wq.Flags{0, wq.PerCPU, wq.Unbound, wq.CPUIntensive, wq.Freezable, wq.MemReclaim, wq.PowerEfficient, wq.Sysfs} {
		q, err := wq.Alloc("flags-good", f, 8)
		if err != nil {
			t.Errorf("Alloc(%v) = %v, want nil", f, err)
			continue
		}
		q.Destroy()
	}
	q, err := wq.AllocOrdered("flags-good-ord", wq.Sysfs)
	if err != nil {
		t.Fatalf("AllocOrdered(Sysfs) = %v", err)
	}
	if q.Type() != wq.TypeOrdered {
		t.Errorf("AllocOrdered type %v", q.Type())
	}
	q.Destroy()
}

func TestFlagsValidation(t *testing.T) {
	for _, f := range []wq.Flags{wq.PerCPU | wq.Unbound, wq.HighPri | wq.RT, 1 << 20} {
		if _, err := wq.Alloc("bad", f, 0); !errors.Is(err, wq.ErrInvalidFlags) {
			t.Errorf("Alloc(%v) err = %v, want ErrInvalidFlags", f, err)
		}
	}
	if _, err := wq.AllocOrdered("bad", wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
		t.Errorf("AllocOrdered(PerCPU) err = %v, want ErrInvalidFlags", err)
	}
}

// TestAllocRefusesEmptyName: a queue needs a name (the error handler,
// metrics and the sysfs-like attributes are keyed by it).
func TestAllocRefusesEmptyName(t *testing.T) {
	before := len(wq.Queues(false))
	if q, err := wq.Alloc("", wq.Unbound, 0); !errors.Is(err, wq.ErrInvalidArgument) || q != nil {
		t.Errorf(`Alloc("") = %v, %v; want nil, ErrInvalidArgument`, q != nil, err)
	}
	if q, err := wq.AllocOrdered("", 0); !errors.Is(err, wq.ErrInvalidArgument) || q != nil {
		t.Errorf(`AllocOrdered("") = %v, %v; want nil, ErrInvalidArgument`, q != nil, err)
	}
	if after := len(wq.Queues(false)); after != before {
		t.Errorf("refused Allocs left %d queues, want %d", after, before)
	}
}
