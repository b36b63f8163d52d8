package scenario

import (
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq/lab/threadattr"
)

// ranAtProbes is how many probe items readBack queues each time, so that
// more than one worker of a pool is likely to be seen.
const ranAtProbes = 3

// readBack queues ranAtProbes probe items on row r's queue or executor,
// one after the other, and adds the scheduling class of the thread that
// ran each (read by the work function itself from /proc) to seen. It
// waits at most 2 s per item, so that a stuck row cannot hang the run;
// such an item is left out.
func readBack(r *rowRun, seen []threadattr.Attr) []threadattr.Attr {
	for range ranAtProbes {
		var a threadattr.Attr
		var err error
		t := newTask(func(*task) { a, err = threadattr.Self() }, signalDone)
		r.run.prepare(t)
		if !r.run.queue(t) {
			continue
		}
		select {
		case <-t.done:
		case <-time.After(2 * time.Second):
			continue
		}
		if err == nil && !slices.Contains(seen, a) {
			seen = append(seen, a)
		}
	}
	return seen
}

// ranAt formats the classes readBack saw, sorted.
func ranAt(seen []threadattr.Attr) string {
	s := slices.Clone(seen)
	slices.SortFunc(s, func(a, b threadattr.Attr) int { return strings.Compare(a.String(), b.String()) })
	return threadattr.Join(s)
}
