package funcname

import (
	"strings"
	"testing"
)

func handler() {}

// TestOf: a function is named by its symbol; nil and non-functions are
// "?". Fault caught: a name that is not the function's symbol (the %ps
// the reports and trace events show), or a panic on nil.
func TestOf(t *testing.T) {
	if got, want := Of(handler), "github.com/gowq/wq/internal/funcname.handler"; got != want {
		t.Errorf("Of(handler) = %q, want %q", got, want)
	}
	if got := Of(func(int) error { return nil }); !strings.HasPrefix(got, "github.com/gowq/wq/internal/funcname.TestOf.func") {
		t.Errorf("Of(closure) = %q", got)
	}
	var nilFn func()
	for _, v := range []any{nil, nilFn, 42} {
		if got := Of(v); got != "?" {
			t.Errorf("Of(%#v) = %q, want ?", v, got)
		}
	}
}

// TestCache: the name is computed once and kept until Reset. Fault
// caught: a cache that recomputes from a later function (an item given
// another function must be Reset), or that Reset does not empty.
func TestCache(t *testing.T) {
	var c Cache
	if _, ok := c.Get(); ok {
		t.Fatal("zero Cache has a name")
	}
	first := c.Of(handler)
	if got := c.Of(TestCache); got != first {
		t.Errorf("cached name changed to %q, want %q kept", got, first)
	}
	c.Reset()
	if _, ok := c.Get(); ok {
		t.Fatal("Reset left a name")
	}
	if got := c.Of(TestCache); !strings.HasSuffix(got, ".TestCache") {
		t.Errorf("after Reset, Of = %q", got)
	}
}
