package wq

import (
	"errors"
	"strings"
	"testing"

	"github.com/gowq/wq/internal/sched"
)

// CheckThreadHeadroom is checkThreadHeadroom, for the external tests that
// run it under real limits.
var CheckThreadHeadroom = func() error {
	resetThreadHeadroom()
	return checkThreadHeadroom()
}

// fakeHeadroom makes checkThreadHeadroom read n and lim (and err) and
// counts the readings.
func fakeHeadroom(t *testing.T) (set func(n int, lim sched.ThreadLimit, err error), reads *int) {
	t.Helper()
	var cur struct {
		n   int
		lim sched.ThreadLimit
		err error
	}
	var count int
	headroom.mu.Lock()
	old := headroom.read
	headroom.read = func() (int, sched.ThreadLimit, error) {
		count++
		return cur.n, cur.lim, cur.err
	}
	headroom.at = 0
	headroom.mu.Unlock()
	t.Cleanup(func() {
		headroom.mu.Lock()
		headroom.read = old
		headroom.at = 0
		headroom.mu.Unlock()
	})
	// set changes what the next reading returns; it leaves the cache
	// alone, so that the tests see when checkThreadHeadroom reads.
	return func(n int, lim sched.ThreadLimit, err error) {
		headroom.mu.Lock()
		cur.n, cur.lim, cur.err = n, lim, err
		headroom.mu.Unlock()
	}, &count
}

// TestCheckThreadHeadroomMargin: at ThreadMargin threads of headroom or
// less a creation is refused with ErrThreadLimit naming the limit and its
// fix; one more thread of headroom allows it.
func TestCheckThreadHeadroomMargin(t *testing.T) {
	set, _ := fakeHeadroom(t)
	pids := sched.ThreadLimit{Name: "pids.max", Path: "/sys/fs/cgroup/pids/job", Max: 30, Current: 30 - sched.ThreadMargin}
	nproc := sched.ThreadLimit{Name: "RLIMIT_NPROC", Max: 40, Current: 45}
	for _, c := range []struct {
		n    int
		lim  sched.ThreadLimit
		want []string // in the error; nil: no error
	}{
		{sched.ThreadMargin + 1, pids, nil},
		{sched.ThreadMargin + 100, pids, nil},
		{sched.ThreadMargin, pids, []string{"pids.max 30", "/sys/fs/cgroup/pids/job", "raise it", "pids.max"}},
		{0, pids, []string{"pids.max 30", "leaves 0 more"}},
		{-5, nproc, []string{"RLIMIT_NPROC 40", "ulimit -u", "leaves 0 more"}},
		{1, sched.ThreadLimit{Name: "kernel.pid_max", Max: 100, Current: 99}, []string{"kernel.pid_max", "sysctl"}},
	} {
		set(c.n, c.lim, nil)
		resetThreadHeadroom()
		err := checkThreadHeadroom()
		if c.want == nil {
			if err != nil {
				t.Errorf("headroom %d: %v, want nil", c.n, err)
			}
			continue
		}
		if !errors.Is(err, ErrThreadLimit) {
			t.Errorf("headroom %d (%s): %v, want ErrThreadLimit", c.n, c.lim.Name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("headroom %d: error %q lacks %q", c.n, err, w)
			}
		}
	}
}

// TestCheckThreadHeadroomCache: far from every limit a reading is reused;
// near one, and after a refusal, every check reads again; a reading error
// does not block creations.
func TestCheckThreadHeadroomCache(t *testing.T) {
	set, reads := fakeHeadroom(t)
	lim := sched.ThreadLimit{Name: "pids.max", Path: "/x", Max: 1000, Current: 0}
	set(1000, lim, nil)
	for range 10 {
		if err := checkThreadHeadroom(); err != nil {
			t.Fatal(err)
		}
	}
	if *reads != 1 {
		t.Errorf("far from the limit: %d readings for 10 checks, want 1", *reads)
	}
	// The cache counts the checks it passed: a reading of
	// ThreadMargin+headroomSlack+3 covers 3 checks (its own and two more),
	// then the next one reads again.
	set(sched.ThreadMargin+headroomSlack+3, lim, nil)
	resetThreadHeadroom()
	*reads = 0
	for range 6 {
		if err := checkThreadHeadroom(); err != nil {
			t.Fatal(err)
		}
	}
	if *reads != 2 {
		t.Errorf("near the slack: %d readings for 6 checks, want 2 (the cache must count creations)", *reads)
	}
	set(sched.ThreadMargin+1, lim, nil)
	resetThreadHeadroom()
	*reads = 0
	for range 5 {
		_ = checkThreadHeadroom()
	}
	if *reads != 5 {
		t.Errorf("near the limit: %d readings for 5 checks, want 5", *reads)
	}
	set(sched.ThreadMargin, lim, nil)
	if err := checkThreadHeadroom(); !errors.Is(err, ErrThreadLimit) {
		t.Fatalf("at the margin: %v", err)
	}
	set(1000, lim, nil) // threads exited: the refusal is not cached
	if err := checkThreadHeadroom(); err != nil {
		t.Errorf("after threads exited: %v", err)
	}
	set(1<<30, sched.ThreadLimit{}, errors.New("cannot read"))
	resetThreadHeadroom()
	if err := checkThreadHeadroom(); err != nil {
		t.Errorf("unreadable limits: %v, want nil", err)
	}
}
