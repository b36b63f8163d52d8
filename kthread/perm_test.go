package kthread_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gowq/wq/internal/testutil"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

const permChildEnv = "KTHREAD_TEST_PERM_CHILD"

// checkRefused runs the privilege checks that must fail with
// ErrPermission in a process without CAP_SYS_NICE and RLIMIT_RTPRIO, and
// returns the failures.
func checkRefused() []string {
	var fails []string
	expectPerm := func(what string, err error) {
		if !errors.Is(err, kthread.ErrPermission) {
			fails = append(fails, fmt.Sprintf("%s = %v, want ErrPermission", what, err))
		} else if !strings.Contains(err.Error(), "CAP_SYS_NICE") {
			fails = append(fails, fmt.Sprintf("%s: error %q does not say how to grant the privilege", what, err))
		}
	}
	for _, c := range []struct {
		name string
		opt  kthread.Option
	}{{"WithFIFO", kthread.WithFIFO()}, {"WithFIFOLow", kthread.WithFIFOLow()}, {"WithNice(-5)", kthread.WithNice(-5)}} {
		wk, err := kthread.CreateWorker("kt-perm", c.opt)
		expectPerm("CreateWorker("+c.name+")", err)
		if wk != nil {
			_ = wk.Destroy()
		}
	}
	// The kernel's own refusal, on a running worker.
	wk, err := kthread.CreateWorker("kt-perm-plain")
	if err != nil {
		return append(fails, "CreateWorker(plain): "+err.Error())
	}
	before, err := sched.GetAttr(wk.TID())
	if err != nil {
		return append(fails, "GetAttr: "+err.Error())
	}
	beforeClass, beforeErr := wk.Class()
	expectPerm("SetFIFO", kthread.SetFIFO(wk))
	expectPerm("SetFIFOLow", kthread.SetFIFOLow(wk))
	expectPerm("SetNormal(-5)", kthread.SetNormal(wk, -5))
	if a, err := sched.GetAttr(wk.TID()); err != nil || a != before {
		fails = append(fails, fmt.Sprintf("after refused changes the worker is %+v (%v), want unchanged %+v", a, err, before))
	}
	if c, err := wk.Class(); c != beforeClass || (err == nil) != (beforeErr == nil) {
		fails = append(fails, fmt.Sprintf("after refused changes Class() = %v, %v; want unchanged %v, %v", c, err, beforeClass, beforeErr))
	}
	// The class recorded for replacement threads did not change either.
	x := kthread.NewWork(runtime.Goexit)
	wk.QueueWork(x)
	wk.FlushWork(x)
	for wk.TID() == 0 {
		runtime.Gosched()
	}
	if a, err := sched.GetAttr(wk.TID()); err != nil || a != before {
		fails = append(fails, fmt.Sprintf("replacement thread after refused changes is %+v (%v), want %+v", a, err, before))
	}
	_ = wk.Destroy()
	// PerCPU: the default HIGHPRI fallback and the FIFO-low workers.
	s, err := kthread.NewPerCPU("kt-perm", wqfallback.Queue(nil))
	expectPerm("NewPerCPU(wqfallback.Queue(nil))", err)
	if s != nil {
		_ = s.Destroy()
	}
	fb, err := wq.Alloc("kt-perm-fb", wq.Unbound, 0)
	if err != nil {
		return append(fails, "wq.Alloc: "+err.Error())
	}
	s, err = kthread.NewPerCPU("kt-perm", wqfallback.Queue(fb), kthread.WithFIFOLow())
	expectPerm("NewPerCPU(WithFIFOLow)", err)
	if s != nil {
		_ = s.Destroy()
	}
	fb.Destroy()
	return fails
}

// TestPermissionRefused checks that a class the process may not use fails
// with ErrPermission instead of degrading: directly when the test itself
// runs unprivileged, else in a child re-executed as user nobody (65534),
// which drops CAP_SYS_NICE.
func TestPermissionRefused(t *testing.T) {
	if sched.CheckRT(1) != nil && sched.CheckNice(-5) != nil {
		for _, f := range checkRefused() {
			t.Error(f)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("privileged but not root: cannot drop CAP_SYS_NICE by switching to nobody")
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^$"}, permChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	text := string(out)
	var exitErr *exec.ExitError
	switch {
	case err != nil && !errors.As(err, &exitErr):
		t.Skipf("cannot start the test binary as nobody: %v", err)
	case strings.Contains(text, "SKIP:"):
		t.Skip(strings.TrimSpace(text))
	case err != nil:
		t.Fatalf("unprivileged child: %v\n%s", err, text)
	case !strings.Contains(text, "OK"):
		t.Fatalf("unprivileged child gave no verdict:\n%s", text)
	}
}
