package threadattr

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSelfMatchesGetpriority: the nice read back from /proc is the one
// the kernel applies to this thread (catches a wrong stat field).
func TestSelfMatchesGetpriority(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	// getpriority(2) returns 20 - nice.
	p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	if want := 20 - p; a.Nice != want {
		t.Errorf("Self().Nice = %d, getpriority says %d", a.Nice, want)
	}
	pol, _, errno := unix.Syscall(unix.SYS_SCHED_GETSCHEDULER, 0, 0, 0)
	if errno != 0 {
		t.Fatal(errno)
	}
	if want := policyName(uint(pol)); a.Policy != want {
		t.Errorf("Self().Policy = %q, sched_getscheduler says %q", a.Policy, want)
	}
}

var errNothingToRaise = errors.New("nothing to raise")

// TestSelfSeesRaisedNice: a thread other than the main one that raises
// its own nice is read back at the new value (catches reading the
// process's main thread instead of the calling one).
func TestSelfSeesRaisedNice(t *testing.T) {
	done := make(chan error, 1)
	var raise func()
	raise = func() {
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// The main thread: stay locked on it, so that a new
			// goroutine runs on another thread, and test there.
			inner := make(chan struct{})
			go func() { raise(); close(inner) }()
			<-inner
			runtime.UnlockOSThread()
			return
		}
		// The thread's nice is raised and it is thrown away with the
		// goroutine (never unlocked), so no other test runs on it.
		a, err := Self()
		if err != nil {
			done <- err
			return
		}
		if a.Nice >= 19 || a.RT() {
			done <- errNothingToRaise
			return
		}
		want := a.Nice + 1
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, want); err != nil {
			done <- err
			return
		}
		b, err := Self()
		if err == nil && b.Nice != want {
			err = errors.New("nice not read back: got " + b.String())
		}
		done <- err
	}
	go raise()
	switch err := <-done; {
	case errors.Is(err, errNothingToRaise):
		t.Skip("the thread runs at nice 19 or RT: no nice to raise it to")
	case err != nil:
		t.Fatal(err)
	}
}

// TestProcessOfSelf lists at least one class for this process and fails
// with ErrNoThreads for a PID that does not exist.
func TestProcessOfSelf(t *testing.T) {
	as, err := Process(os.Getpid())
	if err != nil || len(as) == 0 {
		t.Fatalf("Process(self) = %v, %v", as, err)
	}
	if _, err := Process(1 << 30); err == nil {
		t.Error("Process of a missing PID did not fail")
	}
}

// TestString names the classes as the tables print them.
func TestString(t *testing.T) {
	for _, c := range []struct {
		a    Attr
		want string
	}{
		{Attr{Policy: "SCHED_OTHER", Nice: 19}, "nice 19"},
		{Attr{Policy: "SCHED_FIFO", RTPrio: 1}, "FIFO 1"},
		{Attr{Policy: "SCHED_BATCH", Nice: 0}, "BATCH nice 0"},
	} {
		if got := c.a.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.a, got, c.want)
		}
	}
	if got := Join([]Attr{{Policy: "SCHED_OTHER"}, {Policy: "SCHED_OTHER"}, {Policy: "SCHED_FIFO", RTPrio: 1}}); got != "nice 0, FIFO 1" {
		t.Errorf("Join: %q", got)
	}
}
