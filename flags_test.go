package wq_test

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
)

// TestAllocRefusesPrivateAndUnknownFlags catches Alloc and AllocOrdered
// accepting a bit that is not an exported flag (the private ordered bit
// built a per-CPU queue that called itself ordered and kept no order).
func TestAllocRefusesPrivateAndUnknownFlags(t *testing.T) {
	bad := []wq.Flags{
		wq.Flags(1 << 9),            // the private ordered bit
		wq.Flags(1<<9) | wq.Unbound, // with a valid flag
		wq.Flags(1 << 10),           // the first unused bit
		wq.Flags(1 << 31),           // the top bit
		wq.Flags(1<<9) | wq.PerCPU | wq.Sysfs,
	}
	for _, f := range bad {
		if q, err := wq.Alloc("flags-bad", f, 8); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("Alloc(%v) = %v, want ErrInvalidFlags", f, err)
		}
		if q, err := wq.AllocOrdered("flags-bad-ord", f&^wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("AllocOrdered(%v) = %v, want ErrInvalidFlags", f&^wq.PerCPU, err)
		}
	}
	// Every exported flag alone is still accepted (RT may need privileges).
	for _, f := range []wq.Flags{0, wq.PerCPU, wq.Unbound, wq.CPUIntensive, wq.Freezable, wq.MemReclaim, wq.PowerEfficient, wq.Sysfs} {
		q, err := wq.Alloc("flags-good", f, 8)
		if err != nil {
			t.Errorf("Alloc(%v) = %v, want nil", f, err)
			continue
		}
		q.Destroy()
	}
	q, err := wq.AllocOrdered("flags-good-ord", wq.Sysfs)
	if err != nil {
		t.Fatalf("AllocOrdered(Sysfs) = %v", err)
	}
	if q.Type() != wq.TypeOrdered {
		t.Errorf("AllocOrdered type %v", q.Type())
	}
	q.Destroy()
}

// Normal-class workers get nice 0 whatever the creating thread's nice.
func TestNormalClassSetExplicitly(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root to lower a nice 19 thread back to 0; the unprivileged case is TestNicedUnprivilegedClassReported")
	}
	// Create the pool's first worker from a thread at nice 19: the new
	// thread may inherit it.
	q := mustAlloc(t, "explicit", wq.Unbound, 0, wq.Threads()) // the class of a worker thread
	tidc := make(chan int, 1)
	done := make(chan struct{})
	sched.GoLocked(func() {
		defer close(done)
		_ = sched.SetAttr(0, sched.Attr{Policy: sched.PolicyNormal, Nice: 19})
		w := wq.NewWork(func() { tidc <- sched.Gettid() })
		q.Queue(w)
		w.Flush()
	})
	<-done
	tid := <-tidc
	a, err := sched.GetAttr(tid)
	if err != nil {
		t.Fatal(err)
	}
	if a.Policy != sched.PolicyNormal || a.Nice != 0 {
		t.Errorf("normal-class worker %d: %+v, want SCHED_OTHER nice 0", tid, a)
	}
	if s := q.Stats(); s.ClassError != "" {
		t.Errorf("ClassError = %q as root", s.ClassError)
	}
}

// As an unprivileged process at nice 19, a normal-class worker keeps nice
// 19 (it may not lower it): the item still runs, and the shortfall is an
// Info notice, logged once per process, shown in Stats().ClassError, and
// no failed create_worker: nothing goes to the error handler and
// CreateErrors stays 0 (a WARN "create_worker failed ... operation not
// permitted" went to the error handler before, though the worker was
// created).
func TestNicedUnprivilegedClassReported(t *testing.T) {
	if os.Getenv("GOWQ_CHILD_NICED") == "1" {
		nicedChild(t)
		return
	}
	cmd, _ := nobodyCmd(t, []string{"-test.run=^TestNicedUnprivilegedClassReported$", "-test.v"}, "GOWQ_CHILD_NICED=1")
	cmd.Args = append([]string{"nice", "-n", "19"}, cmd.Args...)
	cmd.Path = mustLookPath(t, "nice")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NICED-OK") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func nicedChild(t *testing.T) {
	var logs testutil.SyncBuffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	notices := func() int { return strings.Count(logs.String(), "workers keep the inherited nice") }
	errs := captureErrors(t)
	q := mustAlloc(t, "niced", wq.Unbound, 0, wq.Threads()) // the class of a worker thread
	tidc := make(chan int, 1)
	w := wq.NewWork(func() { tidc <- sched.Gettid() })
	q.Queue(w)
	select {
	case tid := <-tidc:
		a, _ := sched.GetAttr(tid)
		if a.Nice != 19 && a.Nice != 0 {
			t.Fatalf("worker nice %d", a.Nice)
		}
		if a.Nice == 19 {
			if s := q.Stats(); s.ClassError == "" || s.CreateErrors != 0 {
				t.Fatalf("worker kept nice 19: Stats().ClassError %q (want the reason), CreateErrors %d (want 0)", s.ClassError, s.CreateErrors)
			}
			waitFor(t, "the notice", func() bool { return notices() == 1 })
			if l := logs.String(); !strings.Contains(l, "level=INFO") {
				t.Fatalf("the notice is not an Info line:\n%s", l)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("item did not run in a niced unprivileged process")
	}
	// More workers: reported once only.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		q.Queue(wq.NewWork(func() { time.Sleep(time.Millisecond); wg.Done() }))
	}
	wg.Wait()
	time.Sleep(20 * time.Millisecond)
	if n := notices(); n > 1 {
		t.Fatalf("class shortfall noticed %d times, want once", n)
	}
	errs.mu.Lock()
	if len(errs.errs) != 0 {
		t.Fatalf("reports to the error handler, want none (the workers were created): %v", errs.errs)
	}
	errs.mu.Unlock()
	t.Log("NICED-OK")
	println("NICED-OK")
}

func TestFlagsValidation(t *testing.T) {
	for _, f := range []wq.Flags{wq.PerCPU | wq.Unbound, wq.HighPri | wq.RT, 1 << 20} {
		if _, err := wq.Alloc("bad", f, 0); !errors.Is(err, wq.ErrInvalidFlags) {
			t.Errorf("Alloc(%v) err = %v, want ErrInvalidFlags", f, err)
		}
	}
	if _, err := wq.AllocOrdered("bad", wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
		t.Errorf("AllocOrdered(PerCPU) err = %v, want ErrInvalidFlags", err)
	}
}
