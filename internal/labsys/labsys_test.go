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
