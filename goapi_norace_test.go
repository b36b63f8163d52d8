//go:build !race

package wq_test

import (
	"context"
	"testing"

	"github.com/gowq/wq"
)

// TestGoAPIAllocations catches an allocation added to Go, GoContext or
// Group.Go beyond the caller's closure (documented: none), or to Submit
// beyond its Future and done channel (documented: 2). The race detector's
// sync.Pool drops items at random, hence the build tag.
func TestGoAPIAllocations(t *testing.T) {
	q := mustAlloc(t, "goapi-allocs", wq.Unbound, 0)
	ctx := context.Background()
	fn := func() {}
	cfn := func(context.Context) {}
	efn := func(context.Context) error { return nil }
	ffn := func(context.Context) (int, error) { return 1, nil }
	g, _ := q.NewGroup(ctx)
	// Warm the free list, then measure; a GC during a run may empty it,
	// so each figure is the best of three.
	best := func(f func()) float64 {
		m := 1e9
		for range 3 {
			m = min(m, testing.AllocsPerRun(1000, f))
			q.Flush()
		}
		return m
	}
	for name, c := range map[string]struct {
		f    func()
		want float64
	}{
		"Go":        {func() { _ = q.Go(fn) }, 0},
		"GoContext": {func() { _ = q.GoContext(ctx, cfn) }, 0},
		"Group.Go":  {func() { g.Go(efn) }, 0},
		"Submit":    {func() { _ = wq.Submit(q, ctx, ffn) }, 2},
	} {
		if got := best(c.f); got > c.want {
			t.Errorf("%s: %.2f allocs per call, want %v", name, got, c.want)
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
