package wq_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/timer"
	"github.com/gowq/wq/kthread"
)

// Thread creation near a real thread limit, in a child process (see
// limits_test.go for the harness): every thread gowq starts goes through
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
	blocker, err := wq.Alloc("gate-block", wq.Unbound, 512)
	if err != nil {
		childFail("Alloc: %v", err)
	}
	const nReclaim = 16
	var reclaim []*wq.Workqueue
	for i := range nReclaim {
		q, err := wq.Alloc(fmt.Sprintf("gate-reclaim%d", i), wq.Unbound|wq.MemReclaim, 8)
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
	if q, err := wq.Alloc("gate-reclaim-late", wq.Unbound|wq.MemReclaim, 8); !errors.Is(err, wq.ErrThreadLimit) {
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
