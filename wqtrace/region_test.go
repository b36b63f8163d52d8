package wqtrace

import (
	"bytes"
	"runtime/trace"
	"sync"
	"testing"
)

func TestRegionTracer(t *testing.T) {
	rt := NewRegionTracer()
	// Not tracing: nothing is opened.
	rt.Trace(&Event{Kind: ExecuteStart, TID: 1, Function: "main.idle"})
	if rt.Open() != 0 {
		t.Fatalf("region opened while tracing is off")
	}
	if trace.IsEnabled() {
		t.Skip("runtime/trace already running (go test -trace?); cannot start another")
	}
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot start runtime/trace: %v", err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() { // one "worker": start and end on the same goroutine
			defer wg.Done()
			for i := range 50 {
				work := uintptr(w<<8 | i)
				rt.Trace(&Event{Kind: QueueWork, TID: 100 + w, Work: work, Function: "main.handle", Workqueue: "events", ReqCPU: WorkCPUUnbound, TargetCPU: -1})
				rt.Trace(&Event{Kind: ActivateWork, TID: 100 + w, Work: work, Function: "main.handle"})
				rt.Trace(&Event{Kind: ExecuteStart, TID: 100 + w, Work: work, Function: "main.handle"})
				rt.Trace(&Event{Kind: ExecuteEnd, TID: 100 + w, Work: work, Function: "main.handle"})
			}
		}()
	}
	wg.Wait()
	// A start without its end is closed by the next start on that TID.
	rt.Trace(&Event{Kind: ExecuteStart, TID: 7, Function: "a"})
	rt.Trace(&Event{Kind: ExecuteStart, TID: 7, Function: "b"})
	if rt.Open() != 1 {
		t.Errorf("open = %d, want 1", rt.Open())
	}
	rt.Trace(&Event{Kind: ExecuteEnd, TID: 7})
	rt.Trace(&Event{Kind: ExecuteEnd, TID: 8}) // no region: ignored
	rt.Trace(nil)
	trace.Stop()
	if rt.Open() != 0 {
		t.Errorf("open = %d after all ends, want 0", rt.Open())
	}
	if buf.Len() == 0 {
		t.Fatal("runtime/trace output is empty")
	}
	// The task and log names are stored as strings in the trace.
	for _, s := range []string{"main.handle", "workqueue_queue_work", "workqueue=events"} {
		if !bytes.Contains(buf.Bytes(), []byte(s)) {
			t.Errorf("trace does not mention %q", s)
		}
	}
}
