package wq_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
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
