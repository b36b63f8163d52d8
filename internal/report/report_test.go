package report

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestHandlersFallBack(t *testing.T) {
	var h Handlers[string]
	if h.Panic(nil) != nil || h.Error(nil) != nil {
		t.Fatal("zero Handlers has handlers")
	}
	var got []string
	global := func(s string) { got = append(got, "global "+s) }
	local := func(s string) { got = append(got, "local "+s) }
	h.SetPanic(global)
	h.Panic(nil)("a")
	h.Panic(local)("b")
	h.SetPanic(nil)
	if h.Panic(nil) != nil {
		t.Fatal("SetPanic(nil) did not unset")
	}
	h.Panic(local)("c")
	if want := "global a,local b,local c"; strings.Join(got, ",") != want {
		t.Fatalf("calls %q, want %q", strings.Join(got, ","), want)
	}
	var ops []string
	h.SetError(func(op, fn string, err error) { ops = append(ops, "global "+op) })
	h.Error(nil)("x", "", nil)
	h.Error(func(op, fn string, err error) { ops = append(ops, "local "+op) })("y", "", nil)
	h.SetError(nil)
	if h.Error(nil) != nil {
		t.Fatal("SetError(nil) did not unset")
	}
	if want := "global x,local y"; strings.Join(ops, ",") != want {
		t.Fatalf("error calls %q, want %q", strings.Join(ops, ","), want)
	}
}

func TestSafeRecovers(t *testing.T) {
	var val any
	var stack []byte
	Safe(func() { panic("boom") }, func(r any, s []byte) { val, stack = r, s })
	if val != "boom" || !strings.Contains(string(stack), "TestSafeRecovers") {
		t.Fatalf("onPanic got %v, stack %q", val, stack)
	}
	called := false
	Safe(func() {}, func(any, []byte) { called = true })
	if called {
		t.Fatal("onPanic called without a panic")
	}
}

func TestGoexit(t *testing.T) {
	// Guard: onGoexit runs, and the goroutine ends.
	var wg sync.WaitGroup
	wg.Add(1)
	var ran, after bool
	go func() {
		defer wg.Done()
		Guard(runtime.Goexit, func(any, []byte) { t.Error("onPanic on Goexit") }, func() { ran = true })
		after = true
	}()
	wg.Wait()
	if !ran || after {
		t.Fatalf("Guard with Goexit: onGoexit ran %v, caller continued %v; want true, false", ran, after)
	}
	// Guard: a panic is recovered and onGoexit is not called.
	var val any
	Guard(func() { panic(errors.New("p")) }, func(r any, _ []byte) { val = r }, func() { t.Error("onGoexit on panic") })
	if val == nil {
		t.Fatal("Guard did not recover the panic")
	}
	// Contained: Goexit and panic end only the helper.
	Contained(runtime.Goexit, func(any, []byte) { t.Error("onPanic on Goexit") })
	val = nil
	Contained(func() { panic("q") }, func(r any, _ []byte) { val = r })
	if val != "q" {
		t.Fatalf("Contained onPanic got %v", val)
	}
}
