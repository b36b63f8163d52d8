package bench_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime/trace"
	"strings"
	"testing"

	xtrace "golang.org/x/exp/trace"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqtrace"
)

// verifyBlock is the work function whose region the test looks for.
func verifyBlock(context.Context) {}

// TestGoContextTraceParenting catches a GoContext item that is not a
// region of the caller's runtime/trace task, or a RegionTracer execution
// task that is not a child of it. It parses the execution trace (here in
// the lab module, so that the library does not depend on x/exp/trace).
func TestGoContextTraceParenting(t *testing.T) {
	if trace.IsEnabled() {
		t.Skip("runtime/trace already running (go test -trace?); cannot start another")
	}
	q, err := wq.Alloc("trace-parent", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	wq.SetTracer(wqtrace.NewRegionTracer())
	defer wq.SetTracer(nil)
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot start runtime/trace: %v", err)
	}
	ctx, task := trace.NewTask(context.Background(), "request")
	if err := q.GoContext(ctx, verifyBlock); err != nil {
		trace.Stop()
		t.Fatal(err)
	}
	q.Flush()
	task.End()
	trace.Stop()

	r, err := xtrace.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var reqID xtrace.TaskID = xtrace.NoTask
	childOfReq, regionInReq := false, false
	for {
		ev, err := r.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind() {
		case xtrace.EventTaskBegin:
			tk := ev.Task()
			if tk.Type == "request" {
				reqID = tk.ID
			} else if reqID != xtrace.NoTask && tk.Parent == reqID && strings.HasSuffix(tk.Type, ".verifyBlock") {
				childOfReq = true
			}
		case xtrace.EventRegionBegin:
			rg := ev.Region()
			if reqID != xtrace.NoTask && rg.Task == reqID && strings.HasSuffix(rg.Type, ".verifyBlock") {
				regionInReq = true
			}
		}
	}
	if reqID == xtrace.NoTask {
		t.Fatal("the trace has no task named request")
	}
	if !regionInReq {
		t.Error("no region named after the work function in the caller's task")
	}
	if !childOfReq {
		t.Error("RegionTracer's execution task is not a child of the caller's task")
	}
}
