package wq_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/testutil"
)

func newBufLogger() (*slog.Logger, *testutil.SyncBuffer) {
	b := &testutil.SyncBuffer{}
	return slog.New(slog.NewTextHandler(b, nil)), b
}

// TestWithLoggerGetsQueueMessages: a queue's own logger receives the
// default error and panic reports about it, with the queue's name; the process-wide logger does not.
func TestWithLoggerGetsQueueMessages(t *testing.T) {
	// Catches messages that still go to slog.Default() or lack the
	// workqueue attribute.
	own, ownBuf := newBufLogger()
	proc, procBuf := newBufLogger()
	wq.SetLogger(proc)
	defer wq.SetLogger(nil)
	q, err := wq.Alloc("lg-own", wq.Unbound, 0, wq.WithLogger(own))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	q.Queue(nil) // ErrNoFunc through the default error handler
	q.Queue(wq.NewWork(func() { panic("lg-boom") }))
	q.Flush()
	out := ownBuf.String()
	for _, want := range []string{"has no function", "lg-boom", "workqueue=lg-own"} {
		if !strings.Contains(out, want) {
			t.Errorf("queue logger output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "workqueue=lg-own"); n < 2 {
		t.Errorf("%d messages carry workqueue=lg-own, want 2:\n%s", n, out)
	}
	if strings.Contains(procBuf.String(), "lg-own") {
		t.Errorf("queue messages reached the process-wide logger:\n%s", procBuf.String())
	}
}

// TestSetLoggerGetsProcessMessages: without WithLogger, queue messages and
// item-only messages go to SetLogger's logger; nil restores the default.
func TestSetLoggerGetsProcessMessages(t *testing.T) {
	// Catches a SetLogger that is ignored by some path.
	proc, procBuf := newBufLogger()
	wq.SetLogger(proc)
	defer wq.SetLogger(nil)
	q := mustAlloc(t, "lg-proc", wq.Unbound, 1)
	q.Queue(nil)
	var self *wq.Work
	self = wq.NewWork(func() { self.Flush() }) // ErrDeadlock, an item-only report
	q.Queue(self)
	q.Flush()
	out := procBuf.String()
	for _, want := range []string{"workqueue=lg-proc", "has no function", "flush_work", "deadlock"} {
		if !strings.Contains(out, want) {
			t.Errorf("process logger output lacks %q:\n%s", want, out)
		}
	}
}
