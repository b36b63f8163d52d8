package wq_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

func TestFreezer(t *testing.T) {
	q := mustAlloc(t, "freeze", wq.Unbound|wq.Freezable, 0)
	wq.FreezeAll()
	var ran atomic.Bool
	w := wq.NewWork(func() { ran.Store(true) })
	q.Queue(w)
	time.Sleep(20 * time.Millisecond)
	if ran.Load() {
		t.Fatal("item started while frozen")
	}
	if !w.Pending() {
		t.Fatal("item lost while frozen")
	}
	wq.ThawAll()
	w.Flush()
	if !ran.Load() {
		t.Fatal("item did not run after thaw")
	}
}
