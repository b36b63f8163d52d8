package wq_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/kthread"
)

// Every refusal of a class says the real cause and the fix (issue 13):
// these tests set up each cause for real in a child process.

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
