package kthread

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// wqFields returns the paths of fields of t, followed through structs and
// arrays held by value (not through pointers or interfaces), whose type
// is declared in package wq.
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
// set's fallback pays only for itself; its fallback state is behind an
// interface set on first use.
func TestPlainWorkCarriesNoWQState(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Work](), reflect.TypeFor[DelayedWork](), reflect.TypeFor[Worker]()} {
		if fs := wqFields(typ, typ.Name()); len(fs) > 0 {
			t.Errorf("%s holds wq state by value: %v", typ.Name(), fs)
		}
	}
}

// TestNoWQDependency: package kthread does not import package wq, directly
// or through the library's other packages (what `go list -deps ./kthread`
// shows); only kthread/wqfallback links the two. It reads the import
// lists of the non-test files.
func TestNoWQDependency(t *testing.T) {
	const mod = "github.com/gowq/wq"
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // import path -> the package that imports it
	var visit func(pkg string)
	visit = func(pkg string) {
		dir := filepath.Join(root, strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/"))
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, e := range ents {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, n), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if p != mod && !strings.HasPrefix(p, mod+"/") {
					continue
				}
				if _, ok := seen[p]; ok {
					continue
				}
				seen[p] = pkg + " (" + n + ")"
				if p != mod {
					visit(p)
				}
			}
		}
	}
	visit(mod + "/kthread")
	if by, ok := seen[mod]; ok {
		t.Fatalf("kthread depends on package wq: imported by %s", by)
	}
	if len(seen) == 0 {
		t.Fatal("found no import of the library's own packages; the walk is broken")
	}
}
