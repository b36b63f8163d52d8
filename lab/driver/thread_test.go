package driver_test

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/lab/driver"
)

// TestThreadRunsOnItsThread: Do runs every function on the one thread
// setup ran on, and a setup error is StartThread's.
func TestThreadRunsOnItsThread(t *testing.T) {
	var setupTid int
	th, err := driver.StartThread(func() error { setupTid = unix.Gettid(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer th.Stop()
	for range 3 {
		var tid int
		th.Do(func() { tid = unix.Gettid() })
		if tid != setupTid || tid == unix.Getpid() {
			t.Fatalf("Do ran on tid %d, setup on %d (pid %d)", tid, setupTid, unix.Getpid())
		}
	}
	boom := errors.New("boom")
	if _, err := driver.StartThread(func() error { return boom }); err != boom {
		t.Errorf("setup error: %v", err)
	}
}
