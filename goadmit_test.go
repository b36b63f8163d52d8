package wq_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/testutil"
)

// TestDefaultQueueUnderRealThreadLimit: under a pids cgroup's pids.max
// (and RLIMIT_NPROC) a few threads above use, 48 items of a default
// (goroutine-backed) queue, each in a 300 ms blocking system call, all
// run and the process lives: the items in flight stay within the thread
// headroom, since the Go runtime creates a thread for each one blocked in
// a system call and aborts the process when it cannot. The limit is set
// before the queue's first item (a limit set after a reading is seen
// within goThreadsReadEvery: doc.go says where the promise ends).
func TestDefaultQueueUnderRealThreadLimit(t *testing.T) {
	switch os.Getenv(limitChildEnv) {
	case "goslots":
		defaultQueueLimitChild(false)
		return
	case "goslots-off":
		defaultQueueLimitChild(true)
		return
	}
	mode := "goslots"
	if os.Getenv("GOWQ_TEST_GOSLOTS_OFF") != "" {
		mode = "goslots-off" // the rule disabled: the child must abort
	}
	for _, k := range limitKinds {
		t.Run(k.name, func(t *testing.T) {
			cmd, limit := k.start(t, "TestDefaultQueueUnderRealThreadLimit", mode)
			out := runLimited(t, cmd, limit)
			if strings.Contains(out, "failed to create new OS thread") || strings.Contains(out, "pthread_create failed") {
				t.Fatalf("the child aborted at the %s limit: its default queue's items made the runtime create threads past the limit:\n%s", k.name, head(out, 40))
			}
			if strings.Contains(out, "LIMIT-CHILD-SKIP") {
				t.Skip(strings.TrimSpace(out))
			}
			if !strings.Contains(out, "LIMIT-CHILD-OK") {
				t.Fatalf("child under %s:\n%s", k.name, head(out, 60))
			}
			for line := range strings.Lines(out) {
				if strings.HasPrefix(line, "goslots:") || strings.HasPrefix(line, "threads at READY") {
					t.Log(strings.TrimSpace(line))
				}
			}
		})
	}
}

func defaultQueueLimitChild(off bool) {
	q, err := wq.Alloc("limit-default", wq.Unbound, 64)
	if err != nil {
		childFail("Alloc: %v", err)
	}
	if !q.GoroutineBacked() {
		q.Destroy()
		fmt.Println("LIMIT-CHILD-SKIP: the default queue is not goroutine-backed (GOWQ_THREADS, or a niced process)")
		return
	}
	childReady()
	if off {
		wq.SetGoSlotsOff(true)
	}
	const n = 48
	took := runSleepers(q, n, 300*time.Millisecond)
	n0, _ := threadsOf(os.Getpid())
	fmt.Printf("goslots: %d items of 300 ms in a system call ran in %v; %d threads\n", n, took, n0)
	q.Destroy()
	fmt.Println("LIMIT-CHILD-OK")
}

// TestDefaultQueueItemsStayWithinThreadLimitFromStart: a child started
// under RLIMIT_NPROC from its first instruction (prlimit execs it, as a
// uid of its own, with the limit 16 threads above what the uid runs)
// queues 150 items on a default queue, each entering a 20 ms nanosleep
// at once, in 30 rounds; the process must live and every item run. It
// caught the slot rule admitting one more item per 0.5 ms while the
// runtime's thread count had not grown yet (items in a system call
// before sysmon handed their P to a new thread): the child aborted with
// "failed to create new OS thread" in 10 runs of 10, within its first
// rounds.
func TestDefaultQueueItemsStayWithinThreadLimitFromStart(t *testing.T) {
	if os.Getenv(limitChildEnv) == "nproc-start" {
		nprocStartChild()
		return
	}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit(1) to start the child under RLIMIT_NPROC")
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestDefaultQueueItemsStayWithinThreadLimitFromStart$", "-test.v"},
		limitChildEnv+"=nproc-start")
	uid := limitUID
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
	n := userThreads(uid) + nprocStartLimit
	// prlimit runs as the uid, lowers its own RLIMIT_NPROC (allowed to
	// any process) and execs the test binary under it.
	cmd.Args = append([]string{prlimit, fmt.Sprintf("--nproc=%d:%d", n, n), "--", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = prlimit
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Logf("child: %v", err)
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		t.Fatalf("child hung:\n%s", out.String())
	}
	s := out.String()
	if strings.Contains(s, "failed to create new OS thread") || strings.Contains(s, "pthread_create failed") {
		t.Fatalf("the child aborted under RLIMIT_NPROC %d: its default queue's items made the runtime create threads past the limit:\n%s", n, head(s, 40))
	}
	if line, ok := childSkipLine(s); ok {
		t.Skip(line)
	}
	if !strings.Contains(s, "LIMIT-CHILD-OK") {
		t.Fatalf("child under RLIMIT_NPROC %d:\n%s", n, head(s, 60))
	}
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "nproc-start:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// nprocStartLimit is how many threads above the uid's count the child of
// TestDefaultQueueItemsStayWithinThreadLimitFromStart may have.
const nprocStartLimit = 16

// userThreads returns how many threads processes of real uid run now
// (RLIMIT_NPROC counts them all).
func userThreads(uid uint32) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		var real uint32
		threads := 0
		ok := false
		for line := range strings.Lines(string(b)) {
			if v, found := strings.CutPrefix(line, "Uid:"); found {
				f := strings.Fields(v)
				if len(f) > 0 {
					u, err := strconv.ParseUint(f[0], 10, 32)
					real, ok = uint32(u), err == nil
				}
			} else if v, found := strings.CutPrefix(line, "Threads:"); found {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if ok && real == uid {
			n += threads
		}
	}
	return n
}

func nprocStartChild() {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		childFail("RLIMIT_NPROC not set: %v %d", err, lim.Cur)
	}
	const rounds, n = 30, 150
	for r := range rounds {
		q, err := wq.Alloc("limit-nproc-start", wq.Unbound, 0)
		if err != nil {
			childFail("Alloc: %v", err)
		}
		if !q.GoroutineBacked() {
			q.Destroy()
			fmt.Println("LIMIT-CHILD-SKIP: the default queue is not goroutine-backed (GOWQ_THREADS, or a niced process)")
			return
		}
		took := runSleepers(q, n, 20*time.Millisecond)
		th, _ := threadsOf(os.Getpid())
		fmt.Printf("nproc-start: round %d: %d items of 20 ms in a system call ran in %v; %d threads, RLIMIT_NPROC %d\n",
			r, n, took, th, lim.Cur)
		q.Destroy()
	}
	fmt.Println("LIMIT-CHILD-OK")
}

// runSleepers queues n items on q that each enter nanosleep(d) at once (a
// blocking system call, no Go wait first), waits up to 60 s for all of
// them in a limit test's child (childWait), and returns how long they
// took, rounded to the ms.
func runSleepers(q *wq.Workqueue, n int, d time.Duration) time.Duration {
	var done atomic.Int64
	t0 := time.Now()
	for range n {
		q.Go(func() {
			ts := unix.NsecToTimespec(int64(d))
			for unix.Nanosleep(&ts, &ts) == unix.EINTR {
			}
			done.Add(1)
		})
	}
	childWait(60*time.Second, "the blocking items", func() bool { return done.Load() == int64(n) })
	return time.Since(t0).Round(time.Millisecond)
}
