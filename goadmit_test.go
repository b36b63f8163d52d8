package wq_test

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
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
	var done atomic.Int64
	t0 := time.Now()
	for range n {
		q.Go(func() {
			ts := unix.Timespec{Nsec: 300e6}
			for unix.Nanosleep(&ts, &ts) == unix.EINTR {
			}
			done.Add(1)
		})
	}
	childWait(60*time.Second, "the blocking items", func() bool { return done.Load() == n })
	n0, _ := threadsOf(os.Getpid())
	fmt.Printf("goslots: %d items of 300 ms in a system call ran in %v; %d threads\n", n, time.Since(t0).Round(time.Millisecond), n0)
	q.Destroy()
	fmt.Println("LIMIT-CHILD-OK")
}
