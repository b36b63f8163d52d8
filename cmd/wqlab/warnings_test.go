package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestWarningsSaidOnceWithCount: the same report for many pools is
// printed once, then counted (catches one stderr line per pool).
func TestWarningsSaidOnceWithCount(t *testing.T) {
	var b bytes.Buffer
	ws := &warnings{w: &b, count: map[string]int{}}
	for _, p := range []string{"pool 1 {cpu 0}", "pool 2 {cpu 1}", "pool 3 {unbound}"} {
		ws.report("create_worker", "kworker/x", errors.New("workers of "+p+" run at the inherited nice 19, not 0"))
	}
	ws.report("other", "f", errors.New("something else"))
	ws.summary()
	out := b.String()
	if n := strings.Count(out, "inherited nice 19"); n != 1 {
		t.Errorf("the warning was printed %d times:\n%s", n, out)
	}
	if !strings.Contains(out, "create_worker warning above came 3 times") || !strings.Contains(out, "something else") ||
		strings.Contains(out, "other warning above came") {
		t.Errorf("counts:\n%s", out)
	}
}
