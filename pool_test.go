package wq_test

import (
	"fmt"
	"os"
	"os/exec"
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
)

// As nobody under nice -n 19, Pools() gives the nice the normal pool's
// workers really run at (read back from a worker), with the class's 0 as
// AskedNice. Catches: the live views saying nice 0 for threads at nice 19.
func TestPoolsNiceReadBackWhenNiced(t *testing.T) {
	if os.Getenv("GOWQ_CHILD_POOLNICE") == "1" {
		poolNiceChild(t)
		return
	}
	niceBin, err := exec.LookPath("nice")
	if err != nil {
		t.Skipf("nice not found: %v", err)
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestPoolsNiceReadBackWhenNiced$", "-test.v"}, "GOWQ_CHILD_POOLNICE=1")
	cmd.Args = append([]string{"nice", "-n", "19"}, cmd.Args...)
	cmd.Path = niceBin
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "POOLNICE-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func poolNiceChild(t *testing.T) {
	wq.SetErrorHandler(func(op, fn string, err error) {})
	defer wq.SetErrorHandler(nil)
	q, err := wq.Alloc("poolnice", wq.Unbound, 0, wq.Threads())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	tidc := make(chan int, 1)
	q.Queue(wq.NewWork(func() { tidc <- sched.Gettid() }))
	var tid int
	select {
	case tid = <-tidc:
	case <-time.After(10 * time.Second):
		t.Fatal("item did not run")
	}
	a, err := sched.GetAttr(tid)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]bool{}
	for _, id := range q.PoolIDs() {
		ids[id] = true
	}
	seen := false
	for _, p := range wq.Pools() {
		if !ids[p.ID] || len(p.Workers) == 0 {
			continue
		}
		seen = true
		if p.Nice != a.Nice || p.AskedNice != 0 {
			t.Errorf("pool %d: Nice %d AskedNice %d; its worker runs at nice %d, the class asks 0", p.ID, p.Nice, p.AskedNice, a.Nice)
		}
	}
	if !seen {
		t.Fatal("no pool of the queue with a worker in Pools()")
	}
	t.Log("POOLNICE-OK")
	println("POOLNICE-OK")
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

func TestIdleReap(t *testing.T) {
	if err := wq.SetIdleTimeout(20 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	defer wq.SetIdleTimeout(300 * time.Second)
	q := mustAlloc(t, "reap", wq.Unbound, 0)
	release := make(chan struct{})
	for i := 0; i < 8; i++ {
		q.Queue(wq.NewWork(func() { <-release }))
	}
	waitFor(t, "8 workers", func() bool { a, i := q.NumWorkers(0); return a-i >= 8 })
	close(release)
	q.Flush()
	waitFor(t, "idle workers to be reaped down to 2", func() bool { a, _ := q.NumWorkers(0); return a == 2 })
}

func TestUnboundPoolsShared(t *testing.T) {
	a := mustAlloc(t, "share-a", wq.Unbound, 0)
	b := mustAlloc(t, "share-b", wq.Unbound, 0)
	if !slices.Equal(a.PoolIDs(), b.PoolIDs()) {
		t.Errorf("queues with equal attributes use pools %v and %v, want the same", a.PoolIDs(), b.PoolIDs())
	}
	nice := reachableNice(t, 5) // 5, or 19 in a niced unprivileged process
	if nice == 0 {
		nice = 19
	}
	if err := b.SetNice(nice); err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.PoolIDs(), b.PoolIDs()) {
		t.Errorf("queues with different nice share pools %v", a.PoolIDs())
	}
	if got, _ := b.Attr("nice"); got != strconv.Itoa(nice) {
		t.Errorf("nice attr %q, want %d", got, nice)
	}
	var tid atomic.Int32
	w := wq.NewWork(func() { tid.Store(int32(wq.Gettid())) })
	b.Queue(w)
	w.Flush()
	if a, _ := sched.GetAttr(int(tid.Load())); a.Nice != nice {
		t.Errorf("worker of the nice %d queue runs at nice %d", nice, a.Nice)
	}
}
