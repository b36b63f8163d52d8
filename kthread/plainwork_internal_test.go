package kthread

import (
	"reflect"
	"testing"
)

// wqFields returns the paths of fields of t, followed through structs and
// arrays held by value (not through pointers), whose type is declared in
// package wq.
func wqFields(t reflect.Type, path string) []string {
	if t.PkgPath() == "github.com/gowq/wq" {
		return []string{path}
	}
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			out = append(out, wqFields(f.Type, path+"."+f.Name)...)
		}
	case reflect.Array:
		out = append(out, wqFields(t.Elem(), path+"[]")...)
	}
	return out
}

// TestPlainWorkCarriesNoWQState: a Work that never goes to a PerCPU
// set's fallback pays only for itself; the fallback's wq.Work is behind a
// pointer allocated on first use.
func TestPlainWorkCarriesNoWQState(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Work](), reflect.TypeFor[DelayedWork]()} {
		if fs := wqFields(typ, typ.Name()); len(fs) > 0 {
			t.Errorf("%s holds wq state by value: %v", typ.Name(), fs)
		}
	}
	// The check itself finds a wq.Work held by value.
	if fs := wqFields(reflect.TypeFor[fallbackWork](), "fallbackWork"); len(fs) != 1 {
		t.Errorf("wqFields(fallbackWork) = %v, want the embedded wq.Work", fs)
	}
}
