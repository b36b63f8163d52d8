package sched

import (
	"sync"
	"testing"
)

// TestThreadSetupApply: on a GoLocked thread, Apply gives the name, the
// affinity and the class the thread already has (so that it needs no
// privilege and cannot fail for a lack of one), each reported apart.
func TestThreadSetupApply(t *testing.T) {
	done := make(chan struct{})
	GoLocked(func() {
		defer close(done)
		cur, err := GetAttr(0)
		if err != nil {
			t.Errorf("GetAttr: %v", err)
			return
		}
		cpus, err := Affinity(0)
		if err != nil || len(cpus) == 0 {
			t.Errorf("Affinity: %v, %v", cpus, err)
			return
		}
		r := ThreadSetup{Name: "wq-setup-test-long-name", CPUs: cpus[:1], Attr: cur}.Apply()
		if r.Name != nil || r.Affinity != nil || r.Class != nil {
			t.Errorf("Apply = %+v, want no errors", r)
		}
		if n, err := ThreadName(Gettid()); err != nil || n != "wq-setup-test-l" {
			t.Errorf("thread name %q, %v; want the first 15 bytes", n, err)
		}
		if got, err := Affinity(0); err != nil || len(got) != 1 || got[0] != cpus[0] {
			t.Errorf("affinity %v, %v; want [%d]", got, err, cpus[0])
		}
		// A CPU that cannot exist: the affinity is refused, the rest applied.
		r = ThreadSetup{Name: "wq-setup-2", CPUs: []int{1 << 20}, Attr: cur}.Apply()
		if r.Affinity == nil || r.Name != nil || r.Class != nil {
			t.Errorf("Apply with a bad CPU = %+v, want only an affinity error", r)
		}
		if n, _ := ThreadName(Gettid()); n != "wq-setup-2" {
			t.Errorf("name after a refused affinity %q, want wq-setup-2", n)
		}
	})
	<-done
}

func TestByThread(t *testing.T) {
	var r ByThread[*int]
	a, b := new(int), new(int)
	if _, ok := r.Self(); ok {
		t.Fatal("empty registry found the caller")
	}
	done := make(chan struct{})
	GoLocked(func() {
		defer close(done)
		tid := r.Enter(a)
		if tid != Gettid() {
			t.Errorf("Enter returned %d, want the tid %d", tid, Gettid())
		}
		if v, ok := r.Self(); !ok || v != a {
			t.Errorf("Self = %v, %v; want a", v, ok)
		}
		r.Leave(tid, b) // not b's: kept
		if v, ok := r.Self(); !ok || v != a {
			t.Errorf("Leave by another owner removed the entry")
		}
		r.Leave(tid, a)
		if _, ok := r.Self(); ok {
			t.Errorf("Self after Leave found the caller")
		}
	})
	<-done
}

func TestByGoroutine(t *testing.T) {
	var r ByGoroutine[string]
	leave := r.Enter("me")
	if got := r.Self(); got != "me" {
		t.Fatalf("Self = %q, want me", got)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // another goroutine is not "me"
		defer wg.Done()
		if got := r.Self(); got != "" {
			t.Errorf("other goroutine's Self = %q, want empty", got)
		}
	}()
	wg.Wait()
	leave()
	if got := r.Self(); got != "" {
		t.Fatalf("Self after leave = %q", got)
	}
}
