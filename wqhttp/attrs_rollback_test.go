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

// TestRefusedWriteRestoresEveryAttribute catches the rollback of a write
// refused by one of several Sysfs queues of one name restoring a default
// instead of what was there: POST policy=highpri to an unbound queue at
// nice 5 and an RT queue is refused (409), and the unbound queue, written
// first half the time, must keep nice 5 and every other attribute.
// Skipped where RT queues are refused.
func TestRefusedWriteRestoresEveryAttribute(t *testing.T) {
	rq, err := wq.Alloc("wh_rollback", wq.Unbound|wq.RT|wq.Sysfs, 0)
	if errors.Is(err, wq.ErrPermission) {
		t.Skip("skipping: the process may not use SCHED_FIFO (needs root or CAP_SYS_NICE and an RT budget)")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rq.Destroy)
	uq := alloc(t, "wh_rollback", wq.Unbound|wq.Sysfs)
	if err := uq.SetNice(5); err != nil {
		t.Fatal(err)
	}
	if err := uq.SetAffinityStrict(true); err != nil {
		t.Fatal(err)
	}
	if err := uq.SetMaxActive(9); err != nil {
		t.Fatal(err)
	}
	srv := server(t, wqhttp.Options{AllowWrites: true})
	uBefore, rBefore := uq.Attrs(), rq.Attrs()
	// The two queues are written in an order that varies between
	// requests: 32 requests write the unbound queue first at least once
	// except with probability 2^-32.
	for i := range 32 {
		for _, c := range []struct{ attr, value string }{{"policy", "highpri"}, {"policy", "fifo"}} {
			if r := do(t, srv, http.MethodPost, "/attrs/wh_rollback/"+c.attr, c.value); r.code != http.StatusConflict {
				t.Fatalf("request %d: POST %s=%s: %d %q, want 409", i, c.attr, c.value, r.code, r.body)
			}
			if got := uq.Attrs(); !reflect.DeepEqual(got, uBefore) {
				t.Fatalf("request %d: refused %s=%s changed the unbound queue from %+v to %+v", i, c.attr, c.value, uBefore, got)
			}
			if got := rq.Attrs(); !reflect.DeepEqual(got, rBefore) {
				t.Fatalf("request %d: refused %s=%s changed the RT queue from %+v to %+v", i, c.attr, c.value, rBefore, got)
			}
		}
	}
	// A write both accept still goes through.
	if r := do(t, srv, http.MethodPost, "/attrs/wh_rollback/max_active", "4"); r.code != http.StatusOK {
		t.Fatalf("POST max_active=4: %d %q", r.code, r.body)
	}
	if uq.MaxActive() != 4 || rq.MaxActive() != 4 {
		t.Errorf("max_active %d and %d after POST 4", uq.MaxActive(), rq.MaxActive())
	}
}

// TestNumberWritesOutOfRangeAnswer400 catches attribute writes through
// wqhttp whose number overflows being accepted (200) as another value.
func TestNumberWritesOutOfRangeAnswer400(t *testing.T) {
	q := alloc(t, "wh_range", wq.PerCPU|wq.Sysfs)
	srv := server(t, wqhttp.Options{AllowWrites: true})
	wdBefore, ciBefore := wq.WatchdogThresh(), wq.CPUIntensiveThresh()
	eaBefore := q.Attrs().EscapeAfter
	for _, c := range []struct{ path, value string }{
		{"/attrs/wh_range/escape_after", "18446744073709552"},
		{"/attrs/wh_range/escape_after", "9223372036854776"},
		{"/attrs/wh_range/max_active", "4294967297"},
		{"/attrs/global/watchdog_thresh", "18446744074"},
		{"/attrs/global/watchdog_thresh", "9223372037"},
		{"/attrs/global/cpu_intensive_thresh_us", "18446744073709552"},
		{"/attrs/global/rt_priority", "4294967297"},
	} {
		if r := do(t, srv, http.MethodPost, c.path, c.value); r.code != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %q, want 400", c.path, c.value, r.code, r.body)
		}
	}
	if wq.WatchdogThresh() != wdBefore || wq.CPUIntensiveThresh() != ciBefore || q.Attrs().EscapeAfter != eaBefore {
		t.Errorf("refused writes changed watchdog_thresh %v -> %v, cpu_intensive_thresh %v -> %v, escape_after %v -> %v",
			wdBefore, wq.WatchdogThresh(), ciBefore, wq.CPUIntensiveThresh(), eaBefore, q.Attrs().EscapeAfter)
		_ = wq.SetWatchdogThresh(wdBefore)
		_ = wq.SetCPUIntensiveThresh(ciBefore)
	}
}

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
