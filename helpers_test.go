package wq_test

import (
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq/internal/testutil"
	"github.com/gowq/wq/wqtrace"
)

// mustReturn runs f and fails the test if it has not returned within 10 s.
func mustReturn(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return (hang)", what)
	}
}

// goexitTracer calls runtime.Goexit or panics (mode) on the first event of
// kind for a function whose name contains fn, on the thread that traces it.
type goexitTracer struct {
	kind  wqtrace.Kind
	fn    string
	mode  string // "goexit" or "panic"
	fired atomic.Int32
}

func (g *goexitTracer) Trace(ev *wqtrace.Event) {
	if ev.Kind != g.kind || !strings.Contains(ev.Function, g.fn) {
		return
	}
	if g.fired.Add(1) > 1 {
		return
	}
	if g.mode == "panic" {
		panic("tracer panic")
	}
	runtime.Goexit()
}

func nobodyCmd(t *testing.T, args []string, env ...string) (*exec.Cmd, string) {
	return testutil.NobodyCommand(t, args, env...)
}

func mustLookPath(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

type tracerFunc func(ev *wqtrace.Event)

func (f tracerFunc) Trace(ev *wqtrace.Event) { f(ev) }
