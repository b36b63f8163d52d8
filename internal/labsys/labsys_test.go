package labsys

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
)

// TestThreadToolsPermissionError: a permission error of the thread tools
// matches ErrPermission and keeps internal/sched's text (the lab prints it
// as a skip reason). Fault caught: an EPERM that errors.Is(ErrPermission)
// does not see, or a text that changed on the way.
func TestThreadToolsPermissionError(t *testing.T) {
	inner := fmt.Errorf("sched_setattr(0): %w", sched.ErrPermission)
	err := permitted(inner)
	if !errors.Is(err, wq.ErrPermission) || !errors.Is(err, sched.ErrPermission) || err.Error() != inner.Error() {
		t.Errorf("permitted(%v) = %v: want wq.ErrPermission too, same text", inner, err)
	}
	other := errors.New("sched_setaffinity(0): invalid argument")
	if permitted(other) != other || permitted(nil) != nil {
		t.Error("an error that is not EPERM, or nil, changed")
	}
}

// TestGoThreadParker: GoThread runs fn off the main thread, pinned where
// asked, and a Parker's Unpark that comes before Park is kept as a token.
// Fault caught: a thread tool that runs fn on the caller's or the main
// thread, or a Parker that loses an early Unpark (the queuer would hang).
func TestGoThreadParker(t *testing.T) {
	type seen struct{ tid, cpu, want int }
	got := make(chan seen, 1)
	var p Parker
	GoThread(func() {
		// A CPU this thread may use: the test's affinity is not assumed.
		allowed, err := sched.Affinity(0)
		if err != nil || len(allowed) == 0 {
			t.Errorf("affinity %v: %v", allowed, err)
			got <- seen{}
			return
		}
		cpu := allowed[len(allowed)-1]
		if err := SetThreadAffinity([]int{cpu}); err != nil {
			t.Error(err)
		}
		p.Park() // the Unpark below may come first: a token
		got <- seen{unix.Gettid(), CurrentCPU(), cpu}
	})
	p.Unpark()
	s := <-got
	if s.tid == unix.Getpid() || s.tid == 0 {
		t.Errorf("fn ran on tid %d (pid %d)", s.tid, unix.Getpid())
	}
	if s.cpu != s.want {
		t.Errorf("pinned to cpu%d, ran on cpu%d", s.want, s.cpu)
	}
	if err := SetThreadAttr(ThreadAttr{Policy: ThreadNormal, Nice: 40}); err == nil {
		t.Error("nice 40 accepted")
	}
	if _, err := ParseScope("cache_shard"); err != nil {
		t.Error(err)
	}
	if _, err := ParseScope("nonesuch"); err == nil {
		t.Error("unknown scope accepted")
	}
}

// TestSetThreadAttrInherited: SetThreadAttrInherited gives the calling
// thread its class without SCHED_RESET_ON_FORK, so that the threads it
// creates inherit it, and SetThreadAttr sets the flag again. Fault caught:
// a FIFO queuer whose raw probe threads start as SCHED_OTHER (the flag
// kept), or a queuer left without the flag after the probe.
func TestSetThreadAttrInherited(t *testing.T) {
	if err := CheckRT(1); err != nil {
		t.Skipf("needs SCHED_FIFO: %v", err)
	}
	type seen struct {
		policy, flags uint64
		err           error
	}
	read := func() seen {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			return seen{err: err}
		}
		return seen{policy: uint64(a.Policy), flags: a.Flags}
	}
	got := make(chan [2]seen, 1)
	if err := GoThread(func() {
		fifo := ThreadAttr{Policy: ThreadFIFO, Priority: 1}
		var s [2]seen
		if s[0].err = SetThreadAttrInherited(fifo); s[0].err == nil {
			s[0] = read()
		}
		if s[1].err = SetThreadAttr(fifo); s[1].err == nil {
			s[1] = read()
		}
		got <- s
	}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	for i, want := range []uint64{0, unix.SCHED_FLAG_RESET_ON_FORK} {
		if s[i].err != nil {
			t.Fatalf("step %d: %v", i, s[i].err)
		}
		if s[i].policy != unix.SCHED_FIFO || s[i].flags&unix.SCHED_FLAG_RESET_ON_FORK != want {
			t.Errorf("step %d: policy %d flags %#x: want SCHED_FIFO, reset-on-fork %#x", i, s[i].policy, s[i].flags, want)
		}
	}
}
