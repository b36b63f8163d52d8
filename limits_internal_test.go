package wq

import (
	"testing"
	"time"
)

// CheckThreadHeadroom is checkThreadHeadroom, for the external tests that
// run it under real limits.
var CheckThreadHeadroom = checkThreadHeadroom

// TestDyingWorkerPassesKickOn: a worker that dies with a kick passes the
// kick on, so the pool's pending item keeps a worker.
// Fault caught: relieveThreadPressure removes every idle
// worker of the other pools, including one a kick has just woken (token
// given, still on p.idle because it leaves idle only after taking the
// lock). That worker used to see dying and return from loop without a
// kick, leaving the pool's pending item with no worker. A dying worker now
// passes the kick on. The race is narrow: this fails rarely when broken.
func TestDyingWorkerPassesKickOn(t *testing.T) {
	q, err := Alloc("rv-relieve", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	for i := 0; i < 200; i++ {
		done := make(chan struct{})
		w := NewWork(func() { close(done) })
		q.Queue(w)
		relieveThreadPressure(nil) // as the mayday timer of a pool at a thread limit does
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Un-strand the pool so that Destroy (which flushes) returns:
			// a second Queue kicks again and creates a worker.
			kickAllPools()
			select {
			case <-done:
				t.Fatalf("iteration %d: the queued item ran only after the test kicked the pool again: relieveThreadPressure made its kicked idle worker exit (lost wake-up)", i)
			case <-time.After(10 * time.Second):
				t.Fatalf("iteration %d: the queued item never ran", i)
			}
		}
	}
}
