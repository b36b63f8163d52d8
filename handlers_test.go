package wq_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/gowq/wq"
)

// calls records handler calls as "handler:queue-or-op".
type calls struct {
	mu  sync.Mutex
	got []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	c.got = append(c.got, s)
	c.mu.Unlock()
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.got)
	slices.Sort(out)
	return out
}

// TestPerQueueHandlers: two queues in one program each get their own
// panic and error handler's calls (WithPanicHandler, WithErrorHandler),
// and a queue without them falls back to the process-wide handlers.
func TestPerQueueHandlers(t *testing.T) {
	var c calls
	wq.SetPanicHandler(func(pi wq.PanicInfo) { c.add("global-panic:" + pi.Workqueue) })
	wq.SetErrorHandler(func(op, fn string, err error) {
		if errors.Is(err, wq.ErrDestroyed) {
			c.add("global-error:" + op)
		}
	})
	t.Cleanup(func() { wq.SetPanicHandler(nil); wq.SetErrorHandler(nil) })

	alloc := func(name string, own bool) *wq.Workqueue {
		var opts []wq.Option
		if own {
			opts = append(opts,
				wq.WithPanicHandler(func(pi wq.PanicInfo) {
					c.add(fmt.Sprintf("%s-panic:%s:%v", name, pi.Workqueue, pi.Value))
				}),
				wq.WithErrorHandler(func(op, fn string, err error) {
					if errors.Is(err, wq.ErrDestroyed) {
						c.add(name + "-error:" + op)
					}
				}))
		}
		q, err := wq.Alloc(name, wq.Unbound, 1, opts...)
		if err != nil {
			t.Fatalf("Alloc(%q): %v", name, err)
		}
		return q
	}
	qa, qb, qc := alloc("hq-a", true), alloc("hq-b", true), alloc("hq-c", false)
	for _, q := range []*wq.Workqueue{qa, qb, qc} {
		w := wq.NewWork(func() { panic("boom") })
		if !q.Queue(w) {
			t.Fatalf("%s: Queue = false", q.Name())
		}
		q.Flush() // the handler runs before the item completes
	}
	if got, want := c.list(), []string{"global-panic:hq-c", "hq-a-panic:hq-a:boom", "hq-b-panic:hq-b:boom"}; !slices.Equal(got, want) {
		t.Fatalf("panic handler calls %q, want %q", got, want)
	}
	c.mu.Lock()
	c.got = nil
	c.mu.Unlock()
	for _, q := range []*wq.Workqueue{qa, qb, qc} {
		q.Destroy()
		if q.Queue(wq.NewWork(func() {})) {
			t.Fatalf("%s: Queue after Destroy = true", q.Name())
		}
	}
	if got, want := c.list(), []string{"global-error:queue_work_on", "hq-a-error:queue_work_on", "hq-b-error:queue_work_on"}; !slices.Equal(got, want) {
		t.Fatalf("error handler calls %q, want %q", got, want)
	}
}

// TestQueueType: Type distinguishes per-CPU, unbound and ordered queues
// (what metrics and wqhttp show as TYPE).
func TestQueueType(t *testing.T) {
	o, err := wq.AllocOrdered("qt-ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Destroy)
	for _, c := range []struct {
		q    *wq.Workqueue
		want wq.QueueType
		str  string
	}{
		{mustAlloc(t, "qt-percpu", 0, 1), wq.TypePerCPU, "percpu"},
		{mustAlloc(t, "qt-unbound", wq.Unbound, 1), wq.TypeUnbound, "unbound"},
		{o, wq.TypeOrdered, "ordered"},
	} {
		if got := c.q.Type(); got != c.want || got.String() != c.str {
			t.Errorf("%s: Type() = %v (%q), want %v (%q)", c.q.Name(), got, got.String(), c.want, c.str)
		}
	}
	if s := wq.QueueType(9).String(); s != "QueueType(9)" {
		t.Errorf("QueueType(9).String() = %q", s)
	}
}
