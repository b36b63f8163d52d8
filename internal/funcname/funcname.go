// Package funcname names a work item's function as the kernel's %ps
// prints a symbol ("main.handle"), for wq's and kthread's Work.Func, trace
// events and reports, and caches the name per item.
package funcname

import (
	"reflect"
	"runtime"
	"sync/atomic"
)

// Of returns the name of the function fn (a func value of any type);
// "?" when fn is not a function, is nil, or has no symbol.
func Of(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return "?"
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return "?"
	}
	return f.Name()
}

// Cache holds a work item's function name once computed. The zero value
// is empty; it is safe from any goroutine.
type Cache struct{ p atomic.Pointer[string] }

// Reset empties the cache (the item's function changed: Init).
func (c *Cache) Reset() { c.p.Store(nil) }

// Get returns the cached name, and whether there is one.
func (c *Cache) Get() (string, bool) {
	if p := c.p.Load(); p != nil {
		return *p, true
	}
	return "", false
}

// Of returns the cached name, computing it from fn (Of) and caching it
// when there is none yet.
func (c *Cache) Of(fn any) string {
	if n, ok := c.Get(); ok {
		return n
	}
	n := Of(fn)
	c.p.Store(&n)
	return n
}
