package wq_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/timer"
	"github.com/gowq/wq/kthread"
	"golang.org/x/sys/unix"
)

// Tests under real thread limits. Each runs a copy of the test binary as
// a child that gets ready (queues allocated, runtime threads started),
// prints READY and waits; the parent then puts the child under a limit a
// few threads above what it has, and tells it GO. The Go runtime aborts a
// process whose thread creation fails, so a child that crashes shows that
// something created a thread past the limit.

const limitChildEnv = "GOWQ_LIMIT_CHILD"

// limitExtra is how many threads above ThreadMargin the limit leaves the
// child beyond what it has when it is ready.
const limitExtra = 4

// limitUID is the uid of the unprivileged RLIMIT_NPROC children: one no
// other process uses, since RLIMIT_NPROC counts every task of the user
// while the gate counts only its own process's threads. It depends on the
// test process, so that test runs of other checkouts at the same time
// (each with children at the limit) do not share it.
var limitUID = uint32(54330 + os.Getpid()%10000)

// threadsOf returns the number of threads of process pid.
func threadsOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no Threads line")
}

// TestThreadLimitHeadroom: under a real limit, checkThreadHeadroom allows
// thread creations while more than ThreadMargin threads are left, refuses
// with ErrThreadLimit naming the limit before the process gets within the
// margin (so the child never crashes), and allows them again once threads
// exit.
func TestThreadLimitHeadroom(t *testing.T) {
	if os.Getenv(limitChildEnv) == "headroom" {
		headroomChild()
		return
	}
	for _, k := range limitKinds {
		t.Run(k.name, func(t *testing.T) {
			cmd, limit := k.start(t, "TestThreadLimitHeadroom", "headroom")
			out := runLimited(t, cmd, limit)
			if !strings.Contains(out, "LIMIT-CHILD-OK") {
				t.Fatalf("child under %s:\n%s", k.name, out)
			}
			for line := range strings.Lines(out) {
				if strings.HasPrefix(line, "refused after") {
					t.Log(strings.TrimSpace(line))
				}
			}
		})
	}
}

func headroomChild() {
	want := os.Getenv("GOWQ_LIMIT_NAME")
	childReady()
	if err := wq.CheckThreadHeadroom(); err != nil {
		childFail("with %d threads of headroom beyond the margin: %v", limitExtra, err)
	}
	// Start threads that stay in a blocking read until released, each
	// after a check, as a pool creates workers.
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		childFail("pipe: %v", err)
	}
	var wg sync.WaitGroup
	started := 0
	var refused error
	for range 4 * (limitExtra + sched.ThreadMargin) {
		if refused = wq.CheckThreadHeadroom(); refused != nil {
			break
		}
		tids := make(chan int, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // the thread dies with the goroutine
			tids <- unix.Gettid()
			var b [1]byte
			_, _ = unix.Read(fds[0], b[:])
		}()
		started++
		// Wait until it sleeps in the read, holding its thread; the
		// runtime's other threads are what the margin is for.
		st, err := sched.OpenStat(<-tids)
		if err != nil {
			childFail("%v", err)
		}
		childWait(20*time.Second, "the reader to block", func() bool {
			s, err := st.State()
			return err == nil && sched.Sleeping(s)
		})
		st.Close()
	}
	if !errors.Is(refused, wq.ErrThreadLimit) {
		childFail("after %d threads: %v, want ErrThreadLimit", started, refused)
	}
	for _, w := range []string{want, "raise it"} {
		if !strings.Contains(refused.Error(), w) {
			childFail("error %q does not mention %q", refused, w)
		}
	}
	if started == 0 {
		childFail("no thread allowed with %d of headroom beyond the margin", limitExtra)
	}
	fmt.Printf("refused after %d threads: %v\n", started, refused)
	unix.Close(fds[1]) // EOF for every reader
	wg.Wait()
	childWait(20*time.Second, "headroom once the threads exited", func() bool {
		return wq.CheckThreadHeadroom() == nil
	})
	unix.Close(fds[0])
	fmt.Println("LIMIT-CHILD-OK")
}

// TestThreadLimitPool is the pool's contract under a real thread limit:
// more items block than the process can get threads
// for. The child must not crash (no worker creation past the limit), the
// error handler must report ErrThreadLimit, a MemReclaim queue's items
// must still run (its rescuer), and once the blocked items are released
// every queued item runs and Destroy returns.
func TestThreadLimitPool(t *testing.T) {
	if os.Getenv(limitChildEnv) == "pool" {
		poolLimitChild()
		return
	}
	for _, k := range limitKinds {
		t.Run(k.name, func(t *testing.T) {
			cmd, limit := k.start(t, "TestThreadLimitPool", "pool")
			out := runLimited(t, cmd, limit)
			if strings.Contains(out, "failed to create new OS thread") || strings.Contains(out, "pthread_create failed") {
				t.Fatalf("the child crashed at the %s limit: a thread was created without checking the headroom "+
					"(pool.go must call checkThreadHeadroom before each worker and treat ErrThreadLimit as a failed creation):\n%s", k.name, head(out, 30))
			}
			if !strings.Contains(out, "LIMIT-CHILD-OK") {
				t.Fatalf("child under %s:\n%s", k.name, out)
			}
		})
	}
}

func poolLimitChild() {
	var mu sync.Mutex
	var limitErrs, otherErrs []string
	wq.SetErrorHandler(func(op, fn string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, wq.ErrThreadLimit) {
			limitErrs = append(limitErrs, op+": "+err.Error())
		} else {
			otherErrs = append(otherErrs, op+": "+err.Error())
		}
	})
	defer wq.SetErrorHandler(nil)
	q, err := wq.Alloc("limit-unbound", wq.Unbound, 64)
	if err != nil {
		childFail("Alloc: %v", err)
	}
	mr, err := wq.Alloc("limit-reclaim", wq.Unbound|wq.MemReclaim, 64)
	if err != nil {
		childFail("Alloc MemReclaim: %v", err)
	}
	pq, err := wq.Alloc("limit-percpu", wq.PerCPU, 0)
	if err != nil {
		childFail("Alloc per-CPU: %v", err)
	}
	childReady()

	release := make(chan struct{})
	const blocked = 4 * (limitExtra + sched.ThreadMargin)
	var done atomic.Int64
	for i := range blocked {
		w := wq.NewWork(func() { <-release; done.Add(1) })
		target := q
		if i%4 == 3 {
			target = pq
		}
		if !target.Queue(w) {
			childFail("Queue of blocking item %d refused", i)
		}
	}
	childWait(20*time.Second, "ErrThreadLimit through the error handler", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(limitErrs) > 0
	})
	// Worker creation now fails: the MemReclaim queue's rescuer must run
	// its items although every worker of the shared pool is blocked.
	const reclaim = 8
	var rescued atomic.Int64
	for i := range reclaim {
		if !mr.Queue(wq.NewWork(func() { rescued.Add(1) })) {
			childFail("Queue of MemReclaim item %d refused", i)
		}
	}
	childWait(20*time.Second, "the MemReclaim items to run while workers cannot be created (rescuer)", func() bool {
		return rescued.Load() == reclaim
	})
	close(release)
	childWait(20*time.Second, "every blocked item to run after the release", func() bool {
		return done.Load() == blocked
	})
	destroyed := make(chan struct{})
	go func() {
		q.Destroy()
		mr.Destroy()
		pq.Destroy()
		close(destroyed)
	}()
	select {
	case <-destroyed:
	case <-time.After(20 * time.Second):
		childFail("Destroy did not return")
	}
	mu.Lock()
	fmt.Printf("limit errors: %d, first: %s\nother errors: %q\n", len(limitErrs), limitErrs[0], otherErrs)
	mu.Unlock()
	fmt.Printf("stats: %+v\n", q.Stats())
	fmt.Println("LIMIT-CHILD-OK")
}

// Thread creation near a real thread limit, in a child process (see
// helpers_test.go for the harness): every thread gowq starts goes through
// the thread gate, which refuses with ErrThreadLimit; nothing may abort
// the process with "pthread_create failed".

// TestThreadGateUnderRealLimit: under a pids cgroup's pids.max (and
// RLIMIT_NPROC) a few threads above use, set a moment after a reading
// that left plenty of room:
//   - 16 MemReclaim queues whose pool cannot create workers each get one
//     item, and each item runs (their rescuers need no new thread);
//   - Alloc of another MemReclaim queue, kthread.CreateWorker and an RT
//     timer base are refused (ErrThreadLimit, or a Go timer) instead of
//     creating a thread.
//
// Catches a lazily started rescuer, a thread creation that bypasses the
// gate (the child then dies in pthread_create), and a headroom reading
// trusted from a cache after the limit was tightened.
func TestThreadGateUnderRealLimit(t *testing.T) {
	switch os.Getenv(limitChildEnv) {
	case "gate":
		gateLimitChild(false)
		return
	case "gate-settled":
		gateLimitChild(true)
		return
	}
	for _, k := range limitKinds {
		// "settled": the child waits past any one-second cache of its
		// last reading before it creates threads, so that each creator
		// meets the limit with a fresh reading.
		for _, mode := range []string{"gate", "gate-settled"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) {
				gateLimitRun(t, k.name, k.start, mode)
			})
		}
	}
}

func gateLimitRun(t *testing.T, name string, start func(t *testing.T, test, mode string) (*exec.Cmd, func(pid int) error), mode string) {
	cmd, limit := start(t, "TestThreadGateUnderRealLimit", mode)
	out := runLimited(t, cmd, limit)
	if strings.Contains(out, "failed to create new OS thread") || strings.Contains(out, "pthread_create failed") {
		t.Fatalf("the child aborted at the %s limit: a thread was created past the gate:\n%s", name, head(out, 40))
	}
	if !strings.Contains(out, "LIMIT-CHILD-OK") {
		t.Fatalf("child under %s:\n%s", name, out)
	}
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "gate:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func gateLimitChild(settle bool) {
	var mu sync.Mutex
	var limitErrs []string
	wq.SetErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrThreadLimit) {
			mu.Lock()
			limitErrs = append(limitErrs, op+": "+err.Error())
			mu.Unlock()
		}
	})
	defer wq.SetErrorHandler(nil)
	// Thread workers: a default unbound queue is goroutine-backed, and its
	// blocked items would never need a thread the gate could refuse.
	blocker, err := wq.Alloc("gate-block", wq.Unbound, 512, wq.Threads())
	if err != nil {
		childFail("Alloc: %v", err)
	}
	const nReclaim = 16
	var reclaim []*wq.Workqueue
	for i := range nReclaim {
		q, err := wq.Alloc(fmt.Sprintf("gate-reclaim%d", i), wq.Unbound|wq.MemReclaim, 8, wq.Threads())
		if err != nil {
			childFail("Alloc MemReclaim %d: %v", i, err)
		}
		reclaim = append(reclaim, q)
	}
	// A reading with plenty of room just before the limit is set: the
	// pool's first worker, and a check.
	warm := make(chan struct{})
	blocker.Queue(wq.NewWork(func() { close(warm) }))
	<-warm
	if err := wq.CheckThreadHeadroom(); err != nil {
		childFail("before the limit: %v", err)
	}
	childReady()
	if settle {
		time.Sleep(1100 * time.Millisecond)
	}

	// Block workers until the pool cannot create more.
	release := make(chan struct{})
	var done atomic.Int64
	queued := 0
	for i := 0; ; i++ {
		mu.Lock()
		n := len(limitErrs)
		mu.Unlock()
		if n > 0 {
			break
		}
		if i > 400 {
			childFail("no ErrThreadLimit after %d blocking items", queued)
		}
		if !blocker.Queue(wq.NewWork(func() { <-release; done.Add(1) })) {
			childFail("Queue of blocking item %d refused", i)
		}
		queued++
		time.Sleep(2 * time.Millisecond) // let the pool create a worker for it
	}
	fmt.Println("phase: the pool is at the limit")
	// Each MemReclaim queue gets one item while its pool cannot create
	// workers.
	var rescued atomic.Int64
	for i, q := range reclaim {
		if !q.Queue(wq.NewWork(func() { rescued.Add(1) })) {
			childFail("Queue on MemReclaim queue %d refused", i)
		}
	}
	childWait(20*time.Second, "every MemReclaim item to be rescued", func() bool {
		return rescued.Load() == nReclaim
	})
	fmt.Println("phase: the MemReclaim items were rescued")
	// Every other creator is refused, not aborted.
	if q, err := wq.Alloc("gate-reclaim-late", wq.Unbound|wq.MemReclaim, 8, wq.Threads()); !errors.Is(err, wq.ErrThreadLimit) {
		if q != nil {
			q.Destroy()
		}
		childFail("Alloc of a MemReclaim queue at the limit: %v, want ErrThreadLimit", err)
	}
	var kws []*kthread.Worker
	var kerr error
	for range 64 {
		kw, err := kthread.CreateWorker("gate-kw")
		if err != nil {
			kerr = err
			break
		}
		kws = append(kws, kw)
	}
	if !errors.Is(kerr, kthread.ErrThreadLimit) {
		childFail("kthread.CreateWorker at the limit: %v after %d workers, want kthread.ErrThreadLimit", kerr, len(kws))
	}
	for _, kw := range kws {
		if err := kw.Destroy(); err != nil {
			childFail("kthread Destroy: %v", err)
		}
	}
	set := timer.AcquireRT(1)
	for cpu := range 2 {
		if b := set.On(cpu); b != nil {
			childFail("RT timer base for CPU %d started at the limit", cpu)
		}
	}
	set.Release()
	close(release)
	childWait(20*time.Second, "every blocked item to run after the release", func() bool {
		return done.Load() == int64(queued)
	})
	destroyed := make(chan struct{})
	go func() {
		blocker.Destroy()
		for _, q := range reclaim {
			q.Destroy()
		}
		close(destroyed)
	}()
	select {
	case <-destroyed:
	case <-time.After(20 * time.Second):
		childFail("Destroy did not return")
	}
	mu.Lock()
	fmt.Printf("gate: %d blocking items, %d refusals reported, first: %s\n", queued, len(limitErrs), limitErrs[0])
	mu.Unlock()
	fmt.Printf("gate: refusals counted by the gate: %d; kthread: %v\n", sched.GateRefusals(), kerr)
	fmt.Println("LIMIT-CHILD-OK")
}
