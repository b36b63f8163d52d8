package wq_test

import (
	"errors"
	"fmt"

	"github.com/gowq/wq"
)

// ApplyAttrs takes a whole configuration: read it with Attrs, change what
// must change, and apply it. Either every field is in force afterwards,
// or, when one is refused, none changed.
func ExampleWorkqueue_ApplyAttrs() {
	q, err := wq.Alloc("example-attrs", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()

	a := q.Attrs()
	fmt.Println("before:", a.Policy, a.Nice, a.Scope, a.Strict, a.MaxActive)

	a.Nice = 19 // a nice any thread may take
	a.Scope = wq.ScopeSystem
	a.Strict = true
	a.MaxActive = 32
	if err := q.ApplyAttrs(a); err != nil {
		fmt.Println(err)
		return
	}
	b := q.Attrs()
	fmt.Println("after:", b.Policy, b.Nice, b.Scope, b.Strict, b.MaxActive)

	// One field out of range: nothing changes, not even the valid ones.
	c := b
	c.Nice = 0
	c.MaxActive = 5000
	err = q.ApplyAttrs(c)
	fmt.Println("refused:", errors.Is(err, wq.ErrInvalidArgument))
	fmt.Println("kept:", q.Attrs().Nice, q.Attrs().MaxActive)

	// The string attributes (SetAttr, wqhttp) go the same way.
	fmt.Println(q.SetAttr("max_active", "18446744073709551617") != nil)
	// Output:
	// before: normal 0 default false 1024
	// after: normal 19 system true 32
	// refused: true
	// kept: 19 32
	// true
}
