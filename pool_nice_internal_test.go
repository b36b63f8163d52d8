package wq

import (
	"errors"
	"testing"
)

// setPoolNice gives the unbound queue q nice want, so that q gets a pool of
// its own (unbound pools are shared by attributes). SetNice refuses, with
// ErrPermission, a nice below the one the process's threads start with
// when it may not lower a nice (unprivileged under nice -n 19); q then
// gets nice 19, which any thread may take: still a pool apart from the
// nice-0 one. It returns the nice set.
func setPoolNice(t testing.TB, q *Workqueue, want int) int {
	t.Helper()
	err := q.SetNice(want)
	if errors.Is(err, ErrPermission) && want != 19 {
		t.Logf("nice %d refused (%v); nice 19 instead", want, err)
		want, err = 19, q.SetNice(19)
	}
	if err != nil {
		t.Fatal(err)
	}
	return want
}
