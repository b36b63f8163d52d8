package wq_test

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/internal/topology"
	"github.com/gowq/wq/wqtrace"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// mustReturn runs f and fails the test if it has not returned within 10 s.
func mustReturn(t *testing.T, what string, f func()) {
	t.Helper()
	testutil.MustReturn(t, what, f)
}

// goexitTracer calls runtime.Goexit or panics (mode) on the first event of
// kind for a function whose name contains fn, on the thread that traces it.
type goexitTracer struct {
	kind  wqtrace.Kind
	fn    string
	mode  string // "goexit" or "panic"
	fired atomic.Int32
}

func (g *goexitTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind != g.kind || !strings.Contains(ev.Function, g.fn) {
		return
	}
	if g.fired.Add(1) > 1 {
		return
	}
	if g.mode == "panic" {
		panic("tracer panic")
	}
	runtime.Goexit()
}

func nobodyCmd(t *testing.T, args []string, env ...string) (*exec.Cmd, string) {
	return testutil.NobodyCommand(t, args, env...)
}

func mustLookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

type tracerFunc func(ev *wqtrace.Event)

func (f tracerFunc) Trace(ev *wqtrace.Event) { f(ev) }

func TestMain(m *testing.M) {
	// The suite provokes thousands of reported errors and panics on
	// purpose: keep them out of the output, where they would bury a
	// failure, unless GOWQ_TEST_LOG=1. Tests that read the reports set
	// their own handler or logger.
	if os.Getenv("GOWQ_TEST_LOG") != "1" {
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	goleak.VerifyTestMain(m,
		// ants/v2 starts its default pool's goroutines at package init.
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreAnyFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"))
}

// waitFor polls cond for up to 10 s; generous so slow machines pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, cond)
}

func mustAlloc(t *testing.T, name string, flags wq.Flags, maxActive int, opts ...wq.Option) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, maxActive, opts...)
	if err != nil {
		t.Fatalf("Alloc(%q, %v): %v", name, flags, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// captureErrors collects what the error handler reports during the test.
func captureErrors(t testing.TB) *errLog {
	l := &errLog{}
	wq.SetErrorHandler(func(op, fn string, err error) {
		l.mu.Lock()
		l.errs = append(l.errs, err)
		l.mu.Unlock()
	})
	t.Cleanup(func() { wq.SetErrorHandler(nil) })
	return l
}

type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) count(target error) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if errors.Is(e, target) {
			n++
		}
	}
	return n
}

func isRoot() bool { return os.Geteuid() == 0 }

func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func boom() { panic("boom") }

// reachableNice returns want if a new thread of this process can take nice
// want, else the lowest nice it can take (a niced unprivileged process
// may not lower its threads' nice).
func reachableNice(t *testing.T, want int) int {
	t.Helper()
	for n := want; n <= 19; n++ {
		if sched.Probe(nil, &sched.Attr{Policy: sched.PolicyNormal, Nice: n}) == nil {
			return n
		}
	}
	t.Fatal("no nice value can be set")
	return 0
}

// allocBounded allocates a queue with WithMaxPending(n), destroyed at cleanup.
func allocBounded(t *testing.T, name string, flags wq.Flags, maxActive, n int, opts ...wq.Option) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, maxActive, append([]wq.Option{wq.WithMaxPending(n)}, opts...)...)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", name, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// blocker is an item that runs until released.
type blocker struct {
	w       *wq.Work
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker() *blocker {
	b := &blocker{started: make(chan struct{}, 1), release: make(chan struct{})}
	b.w = wq.NewWork(func() {
		select {
		case b.started <- struct{}{}:
		default:
		}
		<-b.release
	})
	return b
}

func (b *blocker) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-b.started:
	case <-time.After(30 * time.Second):
		t.Fatal("blocker did not start")
	}
}

func (b *blocker) free() { b.once.Do(func() { close(b.release) }) }

// poolsIdle reports whether every worker of every pool serving q is idle.
func poolsIdle(q *wq.Workqueue) bool {
	ids := map[int]bool{}
	for _, id := range q.PoolIDs() {
		ids[id] = true
	}
	for _, p := range wq.Pools() {
		if ids[p.ID] && p.Idle != len(p.Workers) {
			return false
		}
	}
	return true
}

// escapeCPU returns a CPU whose items can escape (another CPU is online),
// or skips the test.
func escapeCPU(t *testing.T) int {
	t.Helper()
	cpus := wq.OnlineCPUs()
	if len(cpus) < 2 {
		t.Skip("needs 2 CPUs: an item escapes to another CPU")
	}
	return cpus[0]
}

// holdPool makes the workers of q's pool for cpu unable to start anything
// (each blocks when woken, as a worker that cannot get its CPU) until the
// returned release is called; release also runs at cleanup, before the
// queue is destroyed.
func holdPool(t *testing.T, q *wq.Workqueue, cpu int) func() {
	t.Helper()
	var once sync.Once
	rel := wq.HoldWakeups(q, cpu)
	release := func() { once.Do(rel) }
	t.Cleanup(release)
	return release
}

func allocEscape(t *testing.T, name string, flags wq.Flags, maxActive int, d time.Duration) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, maxActive, wq.WithEscapeAfter(d))
	if err != nil {
		t.Fatalf("Alloc(%q, WithEscapeAfter(%v)): %v", name, d, err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// ranOn reports, from inside one item of q, whether its goroutine was
// locked to its thread, and the tid.
func ranOn(t *testing.T, q *wq.Workqueue) (locked bool, tid int) {
	t.Helper()
	type res struct {
		locked bool
		tid    int
	}
	c := make(chan res, 1)
	w := wq.NewWork(func() {
		_, l, ok := sched.GoroutineState()
		if !ok {
			t.Error("goroutine header unreadable")
		}
		c <- res{l, sched.Gettid()}
	})
	if !q.Queue(w) {
		t.Fatal("Queue refused")
	}
	select {
	case r := <-c:
		return r.locked, r.tid
	case <-time.After(10 * time.Second):
		t.Fatal("item did not run")
	}
	return
}

// waitChan waits for ch for up to 60 s (generous: a slow machine passes,
// a lost item fails instead of hanging the suite).
func waitChan(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func newKeyGate() *keyGate {
	g := &keyGate{started: make(chan struct{}), open: make(chan struct{})}
	g.w = wq.NewWork(func() {
		close(g.started)
		<-g.open
	})
	return g
}

// runLimited starts cmd, waits for READY, calls limit with the child's
// pid, sends GO and returns the child's output once it exits. A child
// that runs for 90 s in all is killed (its own waits give up after 20 s
// each and print the queues' state), so that a hang fails the test well
// within go test's default -timeout and the cgroup is still removed.
// childSkipLine returns the child's LIMIT-CHILD-SKIP line: a child that
// found nothing to test in its environment says why and exits before
// READY.
func childSkipLine(out string) (string, bool) {
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "LIMIT-CHILD-SKIP") {
			return strings.TrimSpace(line), true
		}
	}
	return "", false
}

func runLimited(t *testing.T, cmd *exec.Cmd, limit func(pid int) error) string {
	t.Helper()
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(90 * time.Second)
	for !strings.Contains(out.String(), "READY\n") {
		select {
		case err := <-exited:
			if line, ok := childSkipLine(out.String()); ok {
				t.Skip(line)
			}
			t.Fatalf("child exited before READY: %v\n%s", err, out.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("child not READY:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := limit(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("setting the limit: %v", err)
	}
	if _, err := stdin.Write([]byte("GO\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Logf("child: %v", err)
		}
	case <-deadline:
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("child hung:\n%s", out.String())
	}
	return out.String()
}

// limitKinds are the real limits the children run under: a pids cgroup's
// pids.max (root child) and RLIMIT_NPROC (child as an unprivileged uid).
var limitKinds = []struct {
	name  string
	start func(t *testing.T, test, mode string) (*exec.Cmd, func(pid int) error)
}{
	{"pids.max", func(t *testing.T, test, mode string) (*exec.Cmd, func(pid int) error) {
		dir, _ := testutil.NewCgroup(t, "pids")
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^"+test+"$", "-test.v")
		cmd.Env = append(os.Environ(), limitChildEnv+"="+mode, "GOWQ_LIMIT_NAME=pids.max")
		return cmd, func(pid int) error {
			if err := testutil.MoveToCgroup(dir, pid); err != nil {
				return err
			}
			cur, err := testutil.ReadCgroup(dir, "pids.current")
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(cur)
			if err != nil {
				return err
			}
			return testutil.WriteCgroup(dir, "pids.max", strconv.Itoa(n+sched.ThreadMargin+limitExtra))
		}
	}},
	{"RLIMIT_NPROC", func(t *testing.T, test, mode string) (*exec.Cmd, func(pid int) error) {
		cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^" + test + "$", "-test.v"},
			limitChildEnv+"="+mode, "GOWQ_LIMIT_NAME=RLIMIT_NPROC")
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: limitUID, Gid: limitUID}
		// The child lowers its own RLIMIT_NPROC on GO (childReady):
		// prlimit(2) on another user's process may be refused even to
		// root (it is here, by the security module).
		return cmd, func(int) error { return nil }
	}},
}

// childReady prints READY and waits for the parent's GO. Under
// RLIMIT_NPROC the child then sets its own limit, limitExtra threads
// above the margin beyond the threads it has (a process may always lower
// its own limits).
func childReady() {
	settleThreads()
	fmt.Println("READY")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	if os.Getenv("GOWQ_LIMIT_NAME") == "RLIMIT_NPROC" {
		n, err := threadsOf(os.Getpid())
		if err != nil {
			childFail("%v", err)
		}
		lim := uint64(n + sched.ThreadMargin + limitExtra)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: lim, Max: lim}); err != nil {
			childFail("setrlimit(RLIMIT_NPROC, %d): %v", lim, err)
		}
	}
}

// settleThreads waits until every thread the child asked for exists:
// no creation admitted by the thread gate is still waiting for its
// thread, and the thread count has not changed for 100 ms (the runtime
// creates the Ms that replace the ones locked goroutines took). A limit
// computed from a count read earlier would miss those threads and sit
// below what the child already needs, which no gate can prevent.
func settleThreads() {
	deadline := time.Now().Add(20 * time.Second)
	last, since := -1, time.Now()
	for time.Now().Before(deadline) {
		n, err := threadsOf(os.Getpid())
		if err != nil {
			childFail("%v", err)
		}
		if n != last || sched.GateStarting() != 0 {
			last, since = n, time.Now()
		} else if time.Since(since) >= 100*time.Millisecond {
			fmt.Printf("threads at READY: %d\n", n)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	childFail("the thread count did not settle (last %d, %d creations starting)", last, sched.GateStarting())
}

// head returns the first n lines of s.
func head(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...\n")
	}
	return strings.Join(lines, "")
}

func childFail(format string, a ...any) {
	fmt.Printf("LIMIT-CHILD-FAIL: "+format+"\n", a...)
	os.Exit(1)
}

// childWait polls cond for up to d.
func childWait(d time.Duration, what string, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			for _, q := range wq.Queues(false) {
				fmt.Printf("%s: %+v\n%s", q.Name(), q.Stats(), q.DumpState())
			}
			childFail("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_NICE) for SCHED_FIFO and nice -20")
	}
}

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

// benchQueueRoundTrip measures queueing an idle item on CPU 0 and waiting
// (without allocating) until it has run: the queue_work, activate_work,
// execute_start and execute_end tracepoints, plus a worker wake-up.
func benchQueueRoundTrip(b *testing.B) {
	q, err := wq.Alloc("obs_bench", wq.PerCPU, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	w := wq.NewWork(func() {})
	q.QueueOn(0, w)
	w.Flush()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if !q.QueueOn(0, w) {
			b.Fatal("QueueOn of an idle item returned false")
		}
		for w.Busy() != 0 {
			runtime.Gosched()
		}
	}
}

// benchQueueOnly measures the queue call alone (the queue_work
// tracepoint): items are queued on a frozen Freezable queue, so they wait
// on the inactive list and no worker is woken; every 65536 items they are
// cancelled (Cancel takes them off the inactive list) with the timer
// stopped. opts are given to Alloc.
func benchQueueOnly(b *testing.B, opts ...wq.Option) {
	q, err := wq.Alloc("obs_bench_frozen", wq.PerCPU|wq.Freezable, 0, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer q.Destroy()
	const chunk = 1 << 16
	items := make([]*wq.Work, chunk)
	for i := range items {
		items[i] = wq.NewWork(func() {})
	}
	cancelAll := func() {
		for _, w := range items {
			w.Cancel()
		}
	}
	wq.FreezeAll()
	defer wq.ThawAll() // before Destroy, which would wait for frozen items
	defer cancelAll()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%chunk == 0 && i > 0 {
			b.StopTimer()
			cancelAll()
			b.StartTimer()
		}
		if !q.QueueOn(0, items[i%chunk]) {
			b.Fatal("QueueOn of an idle item returned false")
		}
	}
}

// hotplugTopologies returns the last online CPU (the one a hotplug test
// takes away), the others, the machine's topology as sysfs reads it and a
// static topology without that CPU; the test's cleanup restores the sysfs
// source. It skips with fewer than 2 CPUs.
func hotplugTopologies(t *testing.T) (cpu int, rest []int, real, reduced *topology.Topology) {
	t.Helper()
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	cpu = online[len(online)-1]
	real, err := (&topology.SysfsSource{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range online {
		if c != cpu {
			rest = append(rest, c)
		}
	}
	t.Cleanup(func() { _ = wq.SetTopologySource(nil) })
	return cpu, rest, real, topology.NewStatic(topology.NewCPUSet(rest...), nil, nil, nil)
}

// Observability: the wq_monitor.py counters against known workloads, the
// lockup watchdog, runtime attributes, and the ftrace text of the tracer
// read back by the parser used for the kernel's captures.

// obsSpinCPU burns d of the calling thread's CPU time (not wall time: on a
// loaded machine a wall-clock spinner may get less CPU than it spun).
func obsSpinCPU(t testing.TB, d time.Duration) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Errorf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %v", err)
		return
	}
	end := ts.Nano() + d.Nanoseconds()
	for ts.Nano() < end {
		_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	}
}

// obsCPUIntensiveThresh sets the CPU-intensive threshold for the test.
func obsCPUIntensiveThresh(t *testing.T, d time.Duration) {
	old := wq.CPUIntensiveThresh()
	if err := wq.SetCPUIntensiveThresh(d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wq.SetCPUIntensiveThresh(old) })
}

// workerTID runs an item on a worker of q for cpu and returns the
// worker's tid.
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

// goBenchChunk bounds the items in flight in the Go benchmarks: the timer
// stops while the queue catches up, so that they measure the submit path
// in a steady state (items return to the free list), not a growing
// backlog.
const goBenchChunk = 256

// benchGoCalls runs call b.N times with allocations reported, waiting
// for q with the timer stopped every goBenchChunk calls and at the end.
func benchGoCalls(b *testing.B, q *wq.Workqueue, call func() error) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%goBenchChunk == 0 && i > 0 {
			b.StopTimer()
			q.Flush()
			b.StartTimer()
		}
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	q.Flush()
}
