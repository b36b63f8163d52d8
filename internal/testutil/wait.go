package testutil

import (
	"runtime"
	"testing"
	"time"
)

// Timeout bounds WaitFor and MustReturn. It only detects hangs: it is
// generous so that a slow or loaded machine passes.
const Timeout = 10 * time.Second

// WaitFor polls cond every 200 us until it returns true, and fails the test
// (t.Fatalf, naming what) if it has not within Timeout. It blocks; call it
// from the test's goroutine.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// MustReturn runs f on a new goroutine and fails the test (t.Fatalf, naming
// what, with every goroutine's stack) if f has not returned within
// Timeout; f is then left running. It blocks; call it from the test's
// goroutine.
func MustReturn(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(Timeout):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("%s did not return (hang); goroutines:\n%s", what, buf)
	}
}
