package wqhttp_test

import (
	"errors"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

// TestRefusedWriteRestoresClassAfterHighPriSwitch catches a rollback that
// re-resolves the saved policy instead of restoring the class that was in
// force: an unbound HighPri queue allocated while highpri_policy was fifo
// (SCHED_FIFO workers, nice 0) keeps that class after highpri_policy goes
// back to highpri, but a refused POST nice=5 (an RT queue of the same name
// refuses it) rolled the queue back through ApplyAttrs{HighPri, nice 0},
// which now means nice -20 and is refused as a read-only nice: the queue
// stayed at normal nice 5. Skipped where SCHED_FIFO is refused.
func TestRefusedWriteRestoresClassAfterHighPriSwitch(t *testing.T) {
	if err := wq.SetHighPriPolicy(wq.PolicyFIFO); err != nil {
		t.Skipf("skipping: the process may not use SCHED_FIFO: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := wq.SetHighPriPolicy(wq.PolicyHighPri); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(restore)
	hq := alloc(t, "wh_rollback_class", wq.Unbound|wq.HighPri|wq.Sysfs)
	restore()
	rq, err := wq.Alloc("wh_rollback_class", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rq.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	hBefore, rBefore := hq.Attrs(), rq.Attrs()
	// The queues are written in an order that varies between requests;
	// 32 requests write the HighPri queue first at least once except
	// with probability 2^-32.
	for i := range 32 {
		r := do(t, srv, http.MethodPost, "/attrs/wh_rollback_class/nice", "5")
		if r.code != http.StatusConflict {
			t.Fatalf("request %d: POST nice=5: %d %q, want 409", i, r.code, r.body)
		}
		if got := hq.Attrs(); !reflect.DeepEqual(got, hBefore) {
			t.Fatalf("request %d: refused nice=5 changed the HighPri queue from %+v to %+v (reply %q)", i, hBefore, got, r.body)
		}
		if got := rq.Attrs(); !reflect.DeepEqual(got, rBefore) {
			t.Fatalf("request %d: refused nice=5 changed the RT queue from %+v to %+v", i, rBefore, got)
		}
	}
}

// TestRefusedWriteKeepsConcurrentWrite catches a rollback that restores a
// snapshot taken before another writer's accepted write and so undoes it:
// POST affinity_scope=cpu to an unbound queue and an ordered queue of one
// name is refused by the ordered queue (read-only scope), while another
// goroutine sets the unbound queue's cpumask; that cpumask must survive.
func TestRefusedWriteKeepsConcurrentWrite(t *testing.T) {
	online := wq.OnlineCPUs()
	if len(online) < 2 {
		t.Skip("needs 2 CPUs")
	}
	uq := alloc(t, "wh_rollback_race", wq.Unbound|wq.Sysfs)
	oq, err := wq.AllocOrdered("wh_rollback_race", wq.Sysfs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(oq.Destroy)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	masks := [][]int{{online[0]}, {online[1]}}
	for round := range 40 {
		// The last of ten writes sets mask.
		mask := masks[round%2]
		stop := make(chan struct{})
		posted := make(chan struct{})
		go func() {
			defer close(posted)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := do(t, srv, http.MethodPost, "/attrs/wh_rollback_race/affinity_scope", "cpu")
				if r.code != http.StatusConflict {
					t.Errorf("POST affinity_scope=cpu: %d %q, want 409", r.code, r.body)
					return
				}
			}
		}()
		for k := range 10 {
			if err := uq.SetCPUMask(masks[(round+k+1)%2]); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		<-posted
		if got := uq.Attrs(); !slices.Equal(got.CPUs, mask) || got.Scope != wq.ScopeDefault {
			t.Fatalf("round %d: after SetCPUMask(%v) beside refused writes: cpumask %v scope %v, want %v default", round, mask, got.CPUs, got.Scope, mask)
		}
	}
}
