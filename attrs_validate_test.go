package wq_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/topology"
)

// Attribute writes are validated against what the process can actually
// do (issue 8, section 3). The situations that make a value impossible are
// real ones, set up in child processes: an unprivileged process started at
// nice 19, a process confined with taskset, a cpuset narrowed under a
// running process, a cgroup without an RT budget. Each child runs the
// named test with attrChildEnv set and reports with its own t.

const attrChildEnv = "GOWQ_ATTR_CHILD"

// attrChild runs test in a child, as an unprivileged user when unpriv
// (nobody from root; the current user otherwise, who must lack
// CAP_SYS_NICE), under the command prefix wrap (e.g. nice -n 19), moved
// into cgroup dir when dir is not "". It fails the test when the child
// fails and skips it when the child skipped.
func attrChild(t *testing.T, test string, unpriv bool, wrap []string, dir string) {
	t.Helper()
	args := []string{"-test.run=^" + test + "$", "-test.v"}
	env := attrChildEnv + "=1"
	var cmd *exec.Cmd
	switch {
	case unpriv && os.Geteuid() == 0:
		cmd, _ = testutil.NobodyCommand(t, args, env)
	case unpriv && sched.HasCapSysNice():
		t.Skip("needs an unprivileged child: run as root (child as nobody) or as a user without CAP_SYS_NICE")
	default:
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(self, args...)
		cmd.Env = append(os.Environ(), env)
	}
	if len(wrap) > 0 {
		p, err := exec.LookPath(wrap[0])
		if err != nil {
			t.Skipf("no %s command", wrap[0])
		}
		cmd.Args = append(append(append([]string{}, wrap...), cmd.Path), cmd.Args[1:]...)
		cmd.Path = p
	}
	if dir != "" {
		testutil.StartInCgroup(cmd, dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") && !strings.Contains(string(out), "--- SKIP") {
		t.Fatalf("child %v: %v\n%s", cmd.Args, err, out)
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Skipf("child skipped:\n%s", out)
	}
}

func inAttrChild() bool { return os.Getenv(attrChildEnv) != "" }

// refused checks that err wraps want and mentions every word of says,
// and that attribute name of q still reads old.
func refused(t *testing.T, what string, err, want error, q *wq.Workqueue, name, old string, says ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not say %q", what, err, s)
		}
	}
	if q != nil {
		if v, _ := q.Attr(name); v != old {
			t.Errorf("%s was refused but changed %s from %q to %q", what, name, old, v)
		}
	}
}

// runsWith queues one item on q, waits for it and returns what probe saw
// on the worker.
func runsWith[T any](t *testing.T, q *wq.Workqueue, probe func() T) T {
	t.Helper()
	var got atomic.Pointer[T]
	w := wq.NewWork(func() { v := probe(); got.Store(&v) })
	if !q.Queue(w) {
		t.Fatalf("%s: Queue refused", q.Name())
	}
	w.Flush()
	p := got.Load()
	if p == nil {
		t.Fatalf("%s: the item did not run", q.Name())
	}
	return *p
}

func workerNice() int {
	a, _ := sched.GetAttr(0)
	return a.Nice
}

// TestAttrValidationNice19 runs as an unprivileged process started with
// nice -n 19: its threads may not lower their nice, so every nice below
// 19 (positive or not) and every class above normal is refused with
// ErrPermission and changes nothing; nice 19 and nice 0 (the normal
// class, which degrades to the inherited nice) are accepted, and the
// queues keep running.
func TestAttrValidationNice19(t *testing.T) {
	if !inAttrChild() {
		attrChild(t, "TestAttrValidationNice19", true, []string{"nice", "-n", "19"}, "")
		return
	}
	if n := workerNice(); n != 19 {
		t.Fatalf("child runs at nice %d, want 19", n)
	}
	if sched.HasCapSysNice() {
		t.Skip("the child has CAP_SYS_NICE")
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NICE, &rl); err == nil && rl.Cur > 1 {
		t.Skipf("RLIMIT_NICE %d lets the child lower its nice", rl.Cur)
	}
	uq := mustAlloc(t, "nice19-unbound", wq.Unbound, 0)
	oq, err := wq.AllocOrdered("nice19-ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oq.Destroy)
	for _, q := range []*wq.Workqueue{uq, oq} {
		old, _ := q.Attr("nice")
		for _, n := range []int{14, 18, 10, 1, -1, -20} {
			refused(t, q.Name()+" SetNice("+strconv.Itoa(n)+")", q.SetNice(n), wq.ErrPermission, q, "nice", old, "nice", "CAP_SYS_NICE")
		}
		refused(t, q.Name()+` SetAttr("nice", "14")`, q.SetAttr("nice", "14"), wq.ErrPermission, q, "nice", old)
		if err := q.SetNice(19); err != nil {
			t.Fatalf("%s: SetNice(19) at nice 19: %v", q.Name(), err)
		}
		if v, _ := q.Attr("nice"); v != "19" {
			t.Errorf("%s: nice %q after SetNice(19)", q.Name(), v)
		}
		if n := runsWith(t, q, workerNice); n != 19 {
			t.Errorf("%s: item ran at nice %d after SetNice(19)", q.Name(), n)
		}
		refused(t, q.Name()+" SetNice(18) after 19", q.SetNice(18), wq.ErrPermission, q, "nice", "19")
		// Nice 0 is the normal class: accepted; a worker that cannot get
		// it keeps its inherited nice, and the queue keeps running.
		if err := q.SetNice(0); err != nil {
			t.Errorf("%s: SetNice(0): %v", q.Name(), err)
		}
		runsWith(t, q, workerNice)
		oldPol, _ := q.Attr("policy")
		refused(t, q.Name()+" SetPolicy(highpri)", q.SetPolicy(wq.PolicyHighPri), wq.ErrPermission, q, "policy", oldPol)
		refused(t, q.Name()+" SetPolicy(fifo)", q.SetPolicy(wq.PolicyFIFO), wq.ErrPermission, q, "policy", oldPol)
		refused(t, q.Name()+` SetAttr("policy", "highpri")`, q.SetAttr("policy", "highpri"), wq.ErrPermission, q, "policy", oldPol)
	}
	pq := mustAlloc(t, "nice19-percpu", wq.PerCPU, 0)
	refused(t, "per-CPU SetPolicy(highpri)", pq.SetPolicy(wq.PolicyHighPri), wq.ErrPermission, pq, "policy", "normal")
	refused(t, `per-CPU SetAttr("policy", "fifo")`, pq.SetAttr("policy", "fifo"), wq.ErrPermission, pq, "policy", "normal")
	runsWith(t, pq, workerNice)

	// Process-wide class settings.
	for _, c := range []struct{ name, value string }{{"highpri_policy", "fifo"}, {"rt_priority", "5"}, {"rt_priority", "99"}} {
		old, _ := wq.GlobalAttr(c.name)
		err := wq.SetGlobalAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrPermission) {
			t.Errorf("SetGlobalAttr(%s, %s) unprivileged: %v, want ErrPermission", c.name, c.value, err)
		}
		if now, _ := wq.GlobalAttr(c.name); now != old {
			t.Errorf("refused SetGlobalAttr(%s, %s) changed it from %q to %q", c.name, c.value, old, now)
		}
	}
	if err := wq.SetGlobalAttr("rt_priority", "1"); err != nil {
		t.Errorf("writing the current rt_priority: %v", err)
	}
	if err := wq.SetGlobalAttr("highpri_policy", "highpri"); err != nil {
		t.Errorf("writing the default highpri_policy: %v", err)
	}
}

// TestAttrValidationTaskset runs under taskset -c 0: gowq's CPUs are the
// process's affinity, so a cpumask of other CPUs is refused and changes
// nothing, and an accepted mask runs items on CPU 0.
func TestAttrValidationTaskset(t *testing.T) {
	if !inAttrChild() {
		if len(wq.OnlineCPUs()) < 2 || !slices.Contains(wq.OnlineCPUs(), 0) {
			t.Skip("needs CPU 0 and another CPU")
		}
		attrChild(t, "TestAttrValidationTaskset", false, []string{"taskset", "-c", "0"}, "")
		return
	}
	if got := wq.OnlineCPUs(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("under taskset -c 0, OnlineCPUs = %v", got)
	}
	uq := mustAlloc(t, "taskset-unbound", wq.Unbound, 0)
	old, _ := uq.Attr("cpumask")
	for _, cpus := range [][]int{{1}, {1, 2}, {1, 63}} {
		refused(t, fmt.Sprintf("SetCPUMask(%v)", cpus), uq.SetCPUMask(cpus), wq.ErrInvalidArgument, uq, "cpumask", old)
	}
	for _, m := range []string{"2", "6", "fffe"} {
		refused(t, `SetAttr("cpumask", "`+m+`")`, uq.SetAttr("cpumask", m), wq.ErrInvalidArgument, uq, "cpumask", old)
	}
	oldG, _ := wq.GlobalAttr("cpumask")
	for _, m := range []string{"2", "c"} {
		err := wq.SetGlobalAttr("cpumask", m)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(cpumask, %s) under taskset -c 0: %v", m, err)
		}
		if now, _ := wq.GlobalAttr("cpumask"); now != oldG {
			t.Errorf("refused global cpumask %s changed it to %s", m, now)
		}
	}
	if err := uq.SetCPUMask([]int{0, 1}); err != nil {
		t.Fatalf("SetCPUMask(0,1): %v", err)
	}
	if cpu := runsWith(t, uq, wq.GetCPU); cpu != 0 {
		t.Errorf("item ran on CPU %d under taskset -c 0", cpu)
	}
}

// TestAttrValidationCpuset runs in a cpuset cgroup that is narrowed to CPU
// 0 while the child runs, and gives the child a stale topology in which
// CPU 1 is still online: only the kernel (sched_setaffinity: EINVAL), as
// the probe thread meets it, knows that CPU 1 is gone. Masks, strict pods
// and per-CPU classes that need CPU 1 are refused and change nothing.
func TestAttrValidationCpuset(t *testing.T) {
	if !inAttrChild() {
		if len(wq.OnlineCPUs()) < 2 || !slices.Contains(wq.OnlineCPUs(), 0) || !slices.Contains(wq.OnlineCPUs(), 1) {
			t.Skip("needs CPUs 0 and 1")
		}
		dir, v2 := testutil.NewCgroup(t, "cpuset")
		if v2 {
			if err := testutil.WriteCgroup(dir, "cpuset.cpus", "0"); err != nil {
				t.Skipf("cannot narrow the v2 cpuset: %v", err)
			}
		} else if err := testutil.WriteCgroup(dir, "cpuset.cpus", "0"); err != nil {
			t.Fatal(err)
		}
		attrChild(t, "TestAttrValidationCpuset", false, nil, dir)
		return
	}
	if aff, _ := sched.Affinity(0); len(aff) != 1 || aff[0] != 0 {
		t.Fatalf("child's affinity %v, want [0] (cpuset 0)", aff)
	}
	stale := &topology.StaticSource{T: topology.NewStatic(topology.NewCPUSet(0, 1), nil, nil, nil)}
	if err := wq.SetTopologySource(stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wq.SetTopologySource(nil) })
	uq := mustAlloc(t, "cpuset-unbound", wq.Unbound, 0)
	old, _ := uq.Attr("cpumask")
	refused(t, "SetCPUMask(1)", uq.SetCPUMask([]int{1}), wq.ErrInvalidArgument, uq, "cpumask", old, "cpuset")
	refused(t, `SetAttr("cpumask", "2")`, uq.SetAttr("cpumask", "2"), wq.ErrInvalidArgument, uq, "cpumask", old, "cpuset")
	// Non-strict, every worker may use 0-1, which the kernel narrows to
	// the cpuset: accepted. Strict per-CPU pods need a worker on CPU 1.
	if err := uq.SetAffinityScope(wq.ScopeCPU); err != nil {
		t.Fatalf("SetAffinityScope(cpu): %v", err)
	}
	refused(t, "SetAffinityStrict(true) with cpu pods", uq.SetAffinityStrict(true), wq.ErrInvalidArgument, uq, "affinity_strict", "0", "cpuset")
	refused(t, `SetAttr("affinity_strict", "1")`, uq.SetAttr("affinity_strict", "1"), wq.ErrInvalidArgument, uq, "affinity_strict", "0")
	oldG, _ := wq.GlobalAttr("cpumask")
	if err := wq.SetGlobalAttr("cpumask", "2"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("global cpumask 2 outside the cpuset: %v", err)
	}
	if now, _ := wq.GlobalAttr("cpumask"); now != oldG {
		t.Errorf("refused global cpumask changed it to %s", now)
	}
	pq := mustAlloc(t, "cpuset-percpu", wq.PerCPU, 0)
	if err := pq.SetPolicy(wq.PolicyHighPri); err == nil {
		t.Errorf("per-CPU SetPolicy(highpri) accepted although CPU 1's workers cannot be pinned")
	} else if v, _ := pq.Attr("policy"); v != "normal" {
		t.Errorf("refused SetPolicy changed policy to %s", v)
	}
	if err := uq.SetCPUMask([]int{0}); err != nil {
		t.Fatalf("SetCPUMask(0): %v", err)
	}
	if cpu := runsWith(t, uq, wq.GetCPU); cpu != 0 {
		t.Errorf("item ran on CPU %d in cpuset 0", cpu)
	}
}

// TestAttrValidationRTBudget runs as root in a new cpu cgroup whose
// cpu.rt_runtime_us is 0 (RT group scheduling): CAP_SYS_NICE is there,
// but the kernel refuses SCHED_FIFO. Every way to ask for the RT class is
// refused with ErrPermission and changes nothing; RT allocation with
// AllowRTFallback falls back to HighPri, which works.
func TestAttrValidationRTBudget(t *testing.T) {
	if !inAttrChild() {
		requireRoot(t)
		dir, v2 := testutil.NewCgroup(t, "cpu")
		if v2 {
			t.Skip("cgroup v2 has no cpu.rt_runtime_us")
		}
		if err := testutil.WriteCgroup(dir, "cpu.rt_runtime_us", "0"); err != nil {
			t.Skipf("no RT group scheduling (cpu.rt_runtime_us): %v", err)
		}
		attrChild(t, "TestAttrValidationRTBudget", false, nil, dir)
		return
	}
	if err := sched.CheckRT(1); err != nil {
		t.Skipf("static RT check already refuses: %v", err)
	}
	pq := mustAlloc(t, "rtbudget-percpu", wq.PerCPU, 0)
	refused(t, "per-CPU SetPolicy(fifo)", pq.SetPolicy(wq.PolicyFIFO), wq.ErrPermission, pq, "policy", "normal", "rt_runtime_us")
	uq := mustAlloc(t, "rtbudget-unbound", wq.Unbound, 0)
	refused(t, `unbound SetAttr("policy", "fifo")`, uq.SetAttr("policy", "fifo"), wq.ErrPermission, uq, "policy", "normal")
	if err := wq.SetHighPriPolicy(wq.PolicyFIFO); !errors.Is(err, wq.ErrPermission) {
		t.Errorf("SetHighPriPolicy(fifo) without an RT budget: %v", err)
	}
	if wq.HighPriPolicy() != wq.PolicyHighPri {
		t.Errorf("refused SetHighPriPolicy changed it to %v", wq.HighPriPolicy())
	}
	for _, p := range []int{2, 50, 99} {
		if err := wq.SetRTPriority(p); !errors.Is(err, wq.ErrPermission) {
			t.Errorf("SetRTPriority(%d) without an RT budget: %v", p, err)
		}
	}
	if wq.RTPriority() != 1 {
		t.Errorf("refused SetRTPriority changed it to %d", wq.RTPriority())
	}
	if q, err := wq.Alloc("rtbudget-rt", wq.PerCPU|wq.RT, 0); !errors.Is(err, wq.ErrPermission) {
		if q != nil {
			q.Destroy()
		}
		t.Errorf("Alloc(RT) without an RT budget: %v, want ErrPermission", err)
	}
	fq, err := wq.Alloc("rtbudget-fallback", wq.Unbound|wq.RT, 0, wq.AllowRTFallback())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fq.Destroy)
	if st := fq.Stats(); !st.Fallback || st.Policy != wq.PolicyHighPri {
		t.Errorf("RT with fallback: %+v, want a visible fallback to highpri", st)
	}
	if n := runsWith(t, fq, workerNice); n != -20 {
		t.Errorf("fallback worker at nice %d, want -20", n)
	}
	if err := pq.SetPolicy(wq.PolicyHighPri); err != nil {
		t.Errorf("SetPolicy(highpri) as root: %v", err)
	}
	if n := runsWith(t, pq, workerNice); n != -20 {
		t.Errorf("highpri worker at nice %d", n)
	}
}

// TestSetGlobalAttrRefusesBadValues: malformed or out-of-range process-wide
// values return ErrInvalidArgument and change nothing.
func TestSetGlobalAttrRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"cpumask", ""}, {"cpumask", "zz"}, {"cpumask", "0"}, {"cpumask", "100000000"}, {"cpumask", "-1"},
		{"highpri_policy", "normal"}, {"highpri_policy", "bogus"}, {"highpri_policy", ""},
		{"rt_priority", "0"}, {"rt_priority", "100"}, {"rt_priority", "-1"}, {"rt_priority", "x"}, {"rt_priority", "1.5"},
		{"default_affinity_scope", "bogus"}, {"default_affinity_scope", "default"}, {"default_affinity_scope", ""},
		{"power_efficient", "maybe"},
	} {
		old, _ := wq.GlobalAttr(c.name)
		if err := wq.SetGlobalAttr(c.name, c.value); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(%s, %q) = %v, want ErrInvalidArgument", c.name, c.value, err)
		}
		if now, _ := wq.GlobalAttr(c.name); now != old {
			t.Errorf("refused SetGlobalAttr(%s, %q) changed %q -> %q", c.name, c.value, old, now)
		}
	}
	if err := wq.SetDefaultAffinityScope(topology.ScopeDefault); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetDefaultAffinityScope(default) = %v, want ErrInvalidArgument", err)
	}
}
