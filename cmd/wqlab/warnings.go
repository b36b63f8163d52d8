package main

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
)

// warnings collects the errors gowq and kthread report during a run
// (their process-wide error handlers) and prints each kind once: the
// first report in full when it comes, the count at the end. A niced,
// unprivileged run otherwise prints one "create_worker failed" line per
// pool, all saying the same thing.
type warnings struct {
	w     io.Writer
	mu    sync.Mutex
	count map[string]int
}

// poolDesc matches the part of a report that names one pool or worker,
// so that reports differing only there count as one kind.
var poolDesc = regexp.MustCompile(`workers of .*? run at`)

func warningKind(op string, err error) string {
	return op + ": " + poolDesc.ReplaceAllString(err.Error(), "workers of … run at")
}

// report is the error handler: the first report of a kind in full, the
// others counted. Safe from any goroutine.
func (ws *warnings) report(op, fn string, err error) {
	k := warningKind(op, err)
	ws.mu.Lock()
	ws.count[k]++
	n := ws.count[k]
	ws.mu.Unlock()
	if n == 1 {
		fmt.Fprintf(ws.w, "wqlab: warning: %s failed (%s): %v (said once; repeats are counted at the end)\n", op, fn, err)
	}
}

// summary prints how often each repeated kind came.
func (ws *warnings) summary() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var ks []string
	for k, n := range ws.count {
		if n > 1 {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	for _, k := range ks {
		op, _, _ := strings.Cut(k, ": ")
		fmt.Fprintf(ws.w, "wqlab: the %s warning above came %d times in all (once per pool or worker)\n", op, ws.count[k])
	}
}

// installWarnings makes a warnings on out the error handler of wq and
// kthread until the returned function is called, which restores the
// default handlers and prints the counts of the repeated warnings.
func installWarnings(out io.Writer) (done func()) {
	ws := &warnings{w: out, count: map[string]int{}}
	wq.SetErrorHandler(ws.report)
	kthread.SetErrorHandler(ws.report)
	return func() {
		wq.SetErrorHandler(nil)
		kthread.SetErrorHandler(nil)
		ws.summary()
	}
}
