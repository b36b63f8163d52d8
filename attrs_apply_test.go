package wq_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
)

// raisedNice returns the process's nice plus k, at most 19: a nice that
// any thread of the process may take, privileged or not (a thread may
// raise its nice, not lower it below where it started).
func raisedNice(t *testing.T, k int) int {
	t.Helper()
	a, err := sched.GetAttr(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return min(a.Nice+k, 19)
}

// applyQueues returns one queue of each kind, RT ones where the process
// may use SCHED_FIFO.
func applyQueues(t *testing.T) map[string]*wq.Workqueue {
	t.Helper()
	qs := map[string]*wq.Workqueue{
		"percpu":  mustAlloc(t, "apply-percpu", wq.PerCPU, 16),
		"unbound": mustAlloc(t, "apply-unbound", wq.Unbound, 16),
	}
	o, err := wq.AllocOrdered("apply-ordered", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Destroy)
	qs["ordered"] = o
	for name, f := range map[string]wq.Flags{"rt-percpu": wq.PerCPU | wq.RT, "rt-unbound": wq.Unbound | wq.RT} {
		q, err := wq.Alloc("apply-"+name, f, 16)
		if errors.Is(err, wq.ErrPermission) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(q.Destroy)
		qs[name] = q
	}
	return qs
}

// TestApplyAttrsRoundTrip catches ApplyAttrs refusing, or changing
// anything, when given back what Attrs returned (the rollback of a
// refused multi-queue write relies on it), and Attrs disagreeing with the
// string attributes.
func TestApplyAttrsRoundTrip(t *testing.T) {
	for name, q := range applyQueues(t) {
		a := q.Attrs()
		if err := q.ApplyAttrs(a); err != nil {
			t.Errorf("%s: ApplyAttrs(Attrs()) = %v", name, err)
		}
		if b := q.Attrs(); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: ApplyAttrs(Attrs()) changed %+v into %+v", name, a, b)
		}
		if got, _ := q.Attr("policy"); got != a.Policy.String() {
			t.Errorf("%s: policy attr %q, Attrs %v", name, got, a.Policy)
		}
		if got, _ := q.Attr("max_active"); got != strconv.Itoa(a.MaxActive) {
			t.Errorf("%s: max_active attr %q, Attrs %d", name, got, a.MaxActive)
		}
		if got, err := q.Attr("nice"); err == nil && got != strconv.Itoa(a.Nice) {
			t.Errorf("%s: nice attr %q, Attrs %d", name, got, a.Nice)
		}
	}
}

// TestApplyAttrsAllOrNothing catches ApplyAttrs installing the valid
// fields of an Attrs that holds one invalid field: every refusal must
// leave every attribute as it was.
func TestApplyAttrsAllOrNothing(t *testing.T) {
	q := mustAlloc(t, "apply-aon", wq.Unbound, 16)
	online := wq.OnlineCPUs()
	base := q.Attrs()
	good := base
	good.Nice = raisedNice(t, 3)
	good.CPUs = online[:1]
	good.Scope = wq.ScopeSystem
	good.Strict = true
	good.MaxActive = 7
	for _, c := range []struct {
		what string
		bad  func(a *wq.Attrs)
		want error
	}{
		{"MaxActive 0", func(a *wq.Attrs) { a.MaxActive = 0 }, wq.ErrInvalidArgument},
		{"MaxActive 2049", func(a *wq.Attrs) { a.MaxActive = 2049 }, wq.ErrInvalidArgument},
		{"Nice 20", func(a *wq.Attrs) { a.Nice = 20 }, wq.ErrInvalidArgument},
		{"Nice -21", func(a *wq.Attrs) { a.Nice = -21 }, wq.ErrInvalidArgument},
		{"CPU -1", func(a *wq.Attrs) { a.CPUs = []int{online[0], -1} }, wq.ErrInvalidArgument},
		{"CPU 1<<20", func(a *wq.Attrs) { a.CPUs = []int{online[0], 1 << 20} }, wq.ErrInvalidArgument},
		{"Scope 99", func(a *wq.Attrs) { a.Scope = 99 }, wq.ErrInvalidArgument},
		{"Policy 7", func(a *wq.Attrs) { a.Policy = 7 }, wq.ErrInvalidArgument},
		{"EscapeAfter on unbound", func(a *wq.Attrs) { a.EscapeAfter = time.Millisecond }, wq.ErrInvalidArgument},
		{"EscapeAfter -1", func(a *wq.Attrs) { a.EscapeAfter = -1 }, wq.ErrInvalidArgument},
	} {
		a := good
		a.CPUs = slices.Clone(good.CPUs)
		c.bad(&a)
		if err := q.ApplyAttrs(a); !errors.Is(err, c.want) {
			t.Errorf("%s: ApplyAttrs = %v, want %v", c.what, err, c.want)
		}
		if got := q.Attrs(); !reflect.DeepEqual(got, base) {
			t.Errorf("%s: refused ApplyAttrs changed %+v into %+v", c.what, base, got)
		}
	}
	if err := q.ApplyAttrs(good); err != nil {
		t.Fatalf("ApplyAttrs(%+v) = %v", good, err)
	}
	if got := q.Attrs(); !reflect.DeepEqual(got, good) {
		t.Errorf("ApplyAttrs(%+v) installed %+v", good, got)
	}
	for name, want := range map[string]string{"nice": strconv.Itoa(good.Nice), "affinity_scope": "system", "affinity_strict": "1", "max_active": "7"} {
		if got, _ := q.Attr(name); got != want {
			t.Errorf("after ApplyAttrs: %s = %q, want %q", name, got, want)
		}
	}
	// Zero values: nil CPUs is every CPU, ScopeDefault follows the default.
	z := good
	z.CPUs, z.Scope = nil, wq.ScopeDefault
	if err := q.ApplyAttrs(z); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.Attr("affinity_scope"); got != "default" {
		t.Errorf("ScopeDefault reads back as %q", got)
	}
	if got := q.Attrs().CPUs; got != nil {
		t.Errorf("nil CPUs reads back as %v", got)
	}
}

// TestApplyAttrsReadOnlyFields catches ApplyAttrs changing a field the
// queue fixes, or refusing one left as Attrs reported it.
func TestApplyAttrsReadOnlyFields(t *testing.T) {
	qs := applyQueues(t)
	online := wq.OnlineCPUs()
	type change struct {
		what string
		f    func(a *wq.Attrs)
		want error // nil: accepted
	}
	cases := map[string][]change{
		"percpu": {
			{"CPUs", func(a *wq.Attrs) { a.CPUs = online[:1] }, wq.ErrReadOnly},
			{"Scope", func(a *wq.Attrs) { a.Scope = wq.ScopeSystem }, wq.ErrReadOnly},
			{"Strict", func(a *wq.Attrs) { a.Strict = true }, wq.ErrReadOnly},
			{"Nice 5", func(a *wq.Attrs) { a.Nice = 5 }, wq.ErrReadOnly},
			{"EscapeAfter", func(a *wq.Attrs) { a.EscapeAfter = time.Hour }, nil},
			{"MaxActive", func(a *wq.Attrs) { a.MaxActive = 3 }, nil},
		},
		"ordered": {
			{"Scope", func(a *wq.Attrs) { a.Scope = wq.ScopeCPU }, wq.ErrReadOnly},
			{"MaxActive 2", func(a *wq.Attrs) { a.MaxActive = 2 }, wq.ErrInvalidArgument},
			{"CPUs", func(a *wq.Attrs) { a.CPUs = online[:1] }, nil},
		},
		"rt-unbound": {
			{"Policy", func(a *wq.Attrs) { a.Policy = wq.PolicyNormal }, wq.ErrReadOnly},
			{"Scope", func(a *wq.Attrs) { a.Scope = wq.ScopeSystem }, wq.ErrReadOnly},
			{"Strict", func(a *wq.Attrs) { a.Strict = false }, wq.ErrReadOnly},
			{"Nice", func(a *wq.Attrs) { a.Nice = -5 }, wq.ErrReadOnly},
			{"CPUs", func(a *wq.Attrs) { a.CPUs = online[:1] }, nil},
		},
		"rt-percpu": {
			{"Policy", func(a *wq.Attrs) { a.Policy = wq.PolicyHighPri }, wq.ErrReadOnly},
			{"Nice", func(a *wq.Attrs) { a.Nice = -20 }, wq.ErrReadOnly},
		},
	}
	for name, changes := range cases {
		q := qs[name]
		if q == nil {
			continue // RT refused here
		}
		for _, c := range changes {
			before := q.Attrs()
			a := before
			c.f(&a)
			err := q.ApplyAttrs(a)
			switch {
			case c.want == nil && err != nil:
				t.Errorf("%s %s: ApplyAttrs = %v, want nil", name, c.what, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Errorf("%s %s: ApplyAttrs = %v, want %v", name, c.what, err, c.want)
			case c.want != nil:
				if got := q.Attrs(); !reflect.DeepEqual(got, before) {
					t.Errorf("%s %s: refused ApplyAttrs changed %+v into %+v", name, c.what, before, got)
				}
			default:
				if got := q.Attrs(); !reflect.DeepEqual(got, a) {
					t.Errorf("%s %s: ApplyAttrs(%+v) installed %+v", name, c.what, a, got)
				}
			}
		}
	}
}

// TestSettersShareTheApplyPath catches a typed setter or a string
// attribute write that bypasses ApplyAttrs's rules: each must leave
// Attrs as ApplyAttrs of the same change would.
func TestSettersShareTheApplyPath(t *testing.T) {
	u := mustAlloc(t, "apply-setters", wq.Unbound, 16)
	p := mustAlloc(t, "apply-setters-p", wq.PerCPU, 16)
	online := wq.OnlineCPUs()
	n4, n6 := raisedNice(t, 4), raisedNice(t, 6)
	steps := []struct {
		what  string
		q     *wq.Workqueue
		set   func() error
		check func(a wq.Attrs) bool
	}{
		{"SetNice", u, func() error { return u.SetNice(n4) }, func(a wq.Attrs) bool { return a.Nice == n4 && a.Policy == wq.PolicyNormal }},
		{"SetAttr(nice)", u, func() error { return u.SetAttr("nice", strconv.Itoa(n6)) }, func(a wq.Attrs) bool { return a.Nice == n6 }},
		{"SetCPUMask", u, func() error { return u.SetCPUMask(online[:1]) }, func(a wq.Attrs) bool { return slices.Equal(a.CPUs, online[:1]) && a.Nice == n6 }},
		{"SetAffinityScope(smt)", u, func() error { return u.SetAffinityScope(wq.ScopeSMT) }, func(a wq.Attrs) bool { return a.Scope == wq.ScopeSMT }},
		{"SetAttr(affinity_scope, default)", u, func() error { return u.SetAttr("affinity_scope", "default") }, func(a wq.Attrs) bool { return a.Scope == wq.ScopeDefault }},
		{"SetAffinityStrict", u, func() error { return u.SetAffinityStrict(true) }, func(a wq.Attrs) bool { return a.Strict }},
		{"SetMaxActive", u, func() error { return u.SetMaxActive(5) }, func(a wq.Attrs) bool { return a.MaxActive == 5 && a.Nice == n6 && a.Strict }},
		{"SetAttr(max_active)", u, func() error { return u.SetAttr("max_active", "6") }, func(a wq.Attrs) bool { return a.MaxActive == 6 }},
		{"SetEscapeAfter", p, func() error { return p.SetEscapeAfter(time.Hour) }, func(a wq.Attrs) bool { return a.EscapeAfter == time.Hour }},
		{"SetAttr(escape_after)", p, func() error { return p.SetAttr("escape_after", "7") }, func(a wq.Attrs) bool { return a.EscapeAfter == 7*time.Microsecond }},
	}
	for _, s := range steps {
		if err := s.set(); err != nil {
			t.Errorf("%s: %v", s.what, err)
			continue
		}
		if a := s.q.Attrs(); !s.check(a) {
			t.Errorf("%s: Attrs %+v", s.what, a)
		}
	}
	// Refused setters change nothing, through either form.
	before := u.Attrs()
	for what, err := range map[string]error{
		"SetNice(20)":          u.SetNice(20),
		"SetAttr(nice, 20)":    u.SetAttr("nice", "20"),
		"SetMaxActive(0)":      u.SetMaxActive(0),
		"SetCPUMask(nil)":      u.SetCPUMask(nil),
		"SetAffinityScope(99)": u.SetAffinityScope(99),
		"SetEscapeAfter(1ms)":  u.SetEscapeAfter(time.Millisecond),
	} {
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s = %v, want ErrInvalidArgument", what, err)
		}
	}
	if got := u.Attrs(); !reflect.DeepEqual(got, before) {
		t.Errorf("refused setters changed %+v into %+v", before, got)
	}
	for what, err := range map[string]error{
		"per-CPU SetNice":           p.SetNice(0),
		"per-CPU SetCPUMask":        p.SetCPUMask(online),
		"per-CPU SetAffinityStrict": p.SetAffinityStrict(false),
		"SetAttr(per_cpu)":          u.SetAttr("per_cpu", "0"),
	} {
		if !errors.Is(err, wq.ErrReadOnly) {
			t.Errorf("%s = %v, want ErrReadOnly", what, err)
		}
	}
	u.Destroy()
	if err := u.ApplyAttrs(u.Attrs()); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("ApplyAttrs after Destroy = %v, want ErrDestroyed", err)
	}
}
