package sched

import "github.com/petermattis/goid"

// fastGoid is true when github.com/petermattis/goid reads the same
// goroutine ids as the traceback header (GoroutineState), checked once at
// start on two goroutines: the library reads the id from the runtime's g
// at an offset that depends on the Go release, and a release it does not
// know would give wrong ids, which would make identity checks lie.
var fastGoid = checkGoid()

func checkGoid() bool {
	same := func() bool {
		id, _, ok := GoroutineState()
		return ok && id == goid.Get()
	}
	ch := make(chan bool)
	go func() { ch <- same() }()
	return same() && <-ch
}

// GoroutineID returns the calling goroutine's id (never reused in a
// process), the id GoroutineState returns: about 1 ns through
// github.com/petermattis/goid where its reading was checked at start,
// otherwise through GoroutineState (about 2 us). ok is false when the id
// cannot be read. Never blocks; safe from any goroutine.
func GoroutineID() (id int64, ok bool) {
	if fastGoid {
		return goid.Get(), true
	}
	id, _, ok = GoroutineState()
	return id, ok
}
