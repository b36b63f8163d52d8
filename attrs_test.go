package wq_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/topology"
	"golang.org/x/sys/unix"
)

// Attribute writes are validated against what the process can actually
// do. The situations that make a value impossible are
// real ones, set up in child processes: an unprivileged process started at
// nice 19, a process confined with taskset, a cpuset narrowed under a
// running process, a cgroup without an RT budget. Each child runs the
// named test with attrChildEnv set and reports with its own t.

const attrChildEnv = "GOWQ_ATTR_CHILD"

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

// TestQueueAttrNumbersRangeChecked catches a per-queue attribute whose
// number overflows into another value (escape_after in us times 1000
// wrapped to 384 ns) instead of being refused: every out-of-range or
// malformed value returns ErrInvalidArgument and changes nothing.
func TestQueueAttrNumbersRangeChecked(t *testing.T) {
	pq := mustAlloc(t, "range-percpu", wq.PerCPU, 16)
	uq := mustAlloc(t, "range-unbound", wq.Unbound, 16)
	if err := pq.SetEscapeAfter(20 * time.Microsecond); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		q     *wq.Workqueue
		name  string
		value string
	}{
		{pq, "escape_after", "18446744073709552"},    // 2^64 ns in us: wrapped to 384 ns
		{pq, "escape_after", "9223372036854776"},     // one us past a time.Duration
		{pq, "escape_after", "99999999999999999999"}, // past int64
		{pq, "escape_after", "-1"},
		{pq, "escape_after", "300000000h"}, // a Go duration past int64
		{pq, "escape_after", "-5us"},
		{pq, "max_active", "4294967297"}, // 2^32+1: 1 in 32 bits
		{pq, "max_active", "99999999999999999999"},
		{pq, "max_active", "0"},
		{pq, "max_active", "2049"},
		{pq, "max_active", "-1"},
		{uq, "nice", "4294967296"}, // 2^32: 0 in 32 bits
		{uq, "nice", "-21"},
		{uq, "nice", "20"},
		{uq, "nice", "1e3"},
		{uq, "max_active", "18446744073709551617"},
		{uq, "cpumask", "1" + strings.Repeat("0", 20000)}, // CPU far past the limit
	}
	for _, c := range cases {
		before := c.q.Attrs()
		err := c.q.SetAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s SetAttr(%s, %.40q) = %v, want ErrInvalidArgument", c.q.Name(), c.name, c.value, err)
		}
		if after := c.q.Attrs(); !reflect.DeepEqual(before, after) {
			t.Errorf("%s SetAttr(%s, %.40q) changed %+v into %+v", c.q.Name(), c.name, c.value, before, after)
		}
	}
	// The largest values that fit are accepted and read back as written.
	if err := pq.SetAttr("escape_after", "9223372036854775"); err != nil {
		t.Errorf("escape_after at the limit: %v", err)
	} else if d := pq.Attrs().EscapeAfter; d != 9223372036854775*time.Microsecond {
		t.Errorf("escape_after at the limit read back as %v", d)
	}
}

// attrValues reads every attribute of q (nil q: every global attribute).
func attrValues(t *testing.T, q *wq.Workqueue) map[string]string {
	out := map[string]string{}
	if q == nil {
		for _, n := range wq.GlobalAttrNames() {
			v, err := wq.GlobalAttr(n)
			if err != nil {
				t.Fatalf("GlobalAttr(%q): %v", n, err)
			}
			out[n] = v
		}
		return out
	}
	for _, n := range q.AttrNames() {
		v, err := q.Attr(n)
		if err != nil {
			t.Fatalf("%s: Attr(%q): %v", q.Name(), n, err)
		}
		out[n] = v
	}
	return out
}

// FuzzSetAttr writes arbitrary values to every queue attribute (per-CPU,
// unbound and ordered queues) and every global attribute. Properties: no
// panic; a refused write changes nothing; an accepted value reads back as
// a value that is accepted again and changes nothing more; the queue
// still runs an item afterwards. Globals are restored after each input.
func FuzzSetAttr(f *testing.F) {
	values := []string{"0", "1", "-1", "5", "19", "-20", "2048", "2049", "ff", "1-3", "0,1", "", " 1", "1\n",
		"cpu", "smt", "cache", "cache_shard", "numa", "system", "default", "normal", "highpri", "fifo",
		"Y", "N", "50us", "1ms", "-5ms", "18446744073709551616", "9223372036854775807", "0x1", "1e3", "\x00"}
	names := []string{"per_cpu", "max_active", "policy", "nice", "cpumask", "affinity_scope", "affinity_strict",
		"escape_after", "nosuch"}
	names = append(names, wq.GlobalAttrNames()...)
	for i, n := range names {
		for j, v := range values {
			if (i+j)%3 == 0 {
				f.Add(uint8(i+j), n, v)
			}
		}
	}
	captureErrors(f)
	percpu, err := wq.Alloc("fuzz-attr-percpu", wq.PerCPU, 0)
	if err != nil {
		f.Fatal(err)
	}
	unbound, err := wq.Alloc("fuzz-attr-unbound", wq.Unbound, 0)
	if err != nil {
		f.Fatal(err)
	}
	ordered, err := wq.AllocOrdered("fuzz-attr-ordered", 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { percpu.Destroy(); unbound.Destroy(); ordered.Destroy() })
	queues := []*wq.Workqueue{percpu, unbound, ordered, nil}
	f.Fuzz(func(t *testing.T, target uint8, name, value string) {
		q := queues[int(target)%len(queues)]
		globals := attrValues(t, nil)
		defer func() {
			// Globals are the process's: put back what the input changed
			// (twice: one value may depend on another).
			for range 2 {
				for n, v := range globals {
					if cur, _ := wq.GlobalAttr(n); cur != v {
						_ = wq.SetGlobalAttr(n, v)
					}
				}
			}
		}()
		set := func(name, value string) error {
			if q == nil {
				return wq.SetGlobalAttr(name, value)
			}
			return q.SetAttr(name, value)
		}
		read := func(name string) (string, error) {
			if q == nil {
				return wq.GlobalAttr(name)
			}
			return q.Attr(name)
		}
		before := attrValues(t, q)
		if err := set(name, value); err != nil {
			if after := attrValues(t, q); !maps.Equal(before, after) {
				t.Fatalf("refused write %q=%q (%v) changed the attributes: %v -> %v", name, value, err, before, after)
			}
		} else {
			got, err := read(name)
			if err != nil {
				t.Fatalf("accepted %q=%q, then Attr: %v", name, value, err)
			}
			mid := attrValues(t, q)
			if err := set(name, got); err != nil {
				t.Fatalf("accepted %q=%q, read back %q, which is refused: %v", name, value, got, err)
			}
			if after := attrValues(t, q); !maps.Equal(mid, after) {
				t.Fatalf("writing back %q=%q changed the attributes: %v -> %v", name, got, mid, after)
			}
		}
		for _, rq := range queues[:3] {
			ran := make(chan struct{})
			rq.Queue(wq.NewWork(func() { close(ran) }))
			select {
			case <-ran:
			case <-time.After(testutil.Timeout):
				t.Fatalf("%s: an item did not run after %q=%q", rq.Name(), name, value)
			}
		}
	})
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

// TestObsAttrs: invalid values give ErrInvalidArgument and change nothing;
// max_active can be written; read-only attributes give ErrReadOnly.
func TestObsAttrs(t *testing.T) {
	pc := mustAlloc(t, "obs_attrs_pc", wq.PerCPU|wq.Sysfs, 16)
	ub := mustAlloc(t, "obs_attrs_ub", wq.Unbound|wq.Sysfs, 0)

	if err := pc.SetAttr("max_active", " 7\n"); err != nil {
		t.Fatalf("SetAttr(max_active, 7): %v", err)
	}
	if v, _ := pc.Attr("max_active"); v != "7" || pc.MaxActive() != 7 {
		t.Errorf("max_active %q / %d after SetAttr 7", v, pc.MaxActive())
	}
	snapshot := func(q *wq.Workqueue) map[string]string {
		m := map[string]string{}
		for _, n := range q.AttrNames() {
			v, err := q.Attr(n)
			if err != nil {
				t.Fatalf("Attr(%s): %v", n, err)
			}
			m[n] = v
		}
		return m
	}
	for _, c := range []struct {
		q           *wq.Workqueue
		name, value string
	}{
		{pc, "max_active", "abc"}, {pc, "max_active", "0"}, {pc, "max_active", "2049"}, {pc, "max_active", ""},
		{pc, "policy", "realtime"}, {pc, "nice", "0"}, {pc, "no_such", "1"},
		{ub, "nice", "20"}, {ub, "nice", "x"}, {ub, "cpumask", "zz"}, {ub, "cpumask", "0"},
		{ub, "affinity_scope", "galaxy"}, {ub, "affinity_strict", "yes"},
	} {
		before := snapshot(c.q)
		err := c.q.SetAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s.SetAttr(%s, %q) = %v, want ErrInvalidArgument", c.q.Name(), c.name, c.value, err)
		}
		if after := snapshot(c.q); !mapsEqual(before, after) {
			t.Errorf("%s.SetAttr(%s, %q) failed but changed %v -> %v", c.q.Name(), c.name, c.value, before, after)
		}
	}
	for _, q := range []*wq.Workqueue{pc, ub} {
		if err := q.SetAttr("per_cpu", "1"); !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("%s per_cpu write: %v, want ErrReadOnly", q.Name(), err)
		}
	}
	if _, err := pc.Attr("cpumask"); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("per-CPU queue Attr(cpumask) = %v, want ErrInvalidArgument", err)
	}
	// Valid unbound writes take effect.
	nice := strconv.Itoa(max(reachableNice(t, 5), 5))
	for name, value := range map[string]string{"affinity_scope": "system", "affinity_strict": "1", "nice": nice} {
		if err := ub.SetAttr(name, value); err != nil {
			t.Errorf("SetAttr(%s, %s): %v", name, value, err)
		} else if v, _ := ub.Attr(name); v != value {
			t.Errorf("Attr(%s) = %q after writing %q", name, v, value)
		}
	}
	run := func(q *wq.Workqueue) {
		var ran atomic.Bool
		q.Queue(wq.NewWork(func() { ran.Store(true) }))
		q.Flush()
		if !ran.Load() {
			t.Errorf("%s: item did not run after attribute changes", q.Name())
		}
	}
	run(pc)
	run(ub)

	// Globals.
	for name, value := range map[string]string{"cpu_intensive_thresh_us": "-1", "watchdog_thresh": "x",
		"default_affinity_scope": "galaxy", "power_efficient": "maybe", "no_such": "1"} {
		old, _ := wq.GlobalAttr(name)
		if err := wq.SetGlobalAttr(name, value); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(%s, %q) = %v, want ErrInvalidArgument", name, value, err)
		}
		if now, _ := wq.GlobalAttr(name); now != old {
			t.Errorf("failed SetGlobalAttr(%s) changed %q -> %q", name, old, now)
		}
	}
	obsCPUIntensiveThresh(t, wq.CPUIntensiveThresh()) // restores it after
	if err := wq.SetGlobalAttr("cpu_intensive_thresh_us", "12000"); err != nil || wq.CPUIntensiveThresh() != 12*time.Millisecond {
		t.Errorf("SetGlobalAttr(cpu_intensive_thresh_us, 12000): %v, now %v", err, wq.CPUIntensiveThresh())
	}
}

// TestObsAttrsRT: an RT queue's nice, affinity_scope, affinity_strict and
// policy are read-only; max_active stays writable.
func TestObsAttrsRT(t *testing.T) {
	q, err := wq.Alloc("obs_attrs_rt", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO (needs root or CAP_SYS_NICE and an RT budget)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	if v, _ := q.Attr("policy"); v != "fifo" {
		t.Errorf("RT policy %q, want fifo", v)
	}
	for name, value := range map[string]string{"nice": "5", "affinity_scope": "system", "affinity_strict": "0", "policy": "normal"} {
		before, _ := q.Attr(name)
		if err := q.SetAttr(name, value); !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("RT SetAttr(%s, %s) = %v, want ErrReadOnly", name, value, err)
		}
		if after, _ := q.Attr(name); after != before {
			t.Errorf("RT %s changed %q -> %q", name, before, after)
		}
	}
	if v, _ := q.Attr("affinity_scope"); v != "cpu" {
		t.Errorf("RT affinity_scope %q, want cpu", v)
	}
	if v, _ := q.Attr("affinity_strict"); v != "1" {
		t.Errorf("RT affinity_strict %q, want 1", v)
	}
	if err := q.SetAttr("max_active", "4"); err != nil || q.MaxActive() != 4 {
		t.Errorf("RT max_active write: %v, now %d", err, q.MaxActive())
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
