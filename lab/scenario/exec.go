package scenario

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/lab/baseline"
	"github.com/gowq/wq/lab/stats"
)

// task is one reusable work item. Every row has its own tasks, so a
// wq.Work is only ever queued on one workqueue (non-reentrance holds).
type task struct {
	w  wq.Work        // gowq rows
	dw wq.DelayedWork // gowq rows of the delayed scenario
	kw *kthread.Work  // kthread rows

	fn     func()      // t.exec, bound once so that queueing does not allocate
	submit func()      // baselines, delayed scenario: hands fn to the executor when the timer fires
	timer  *time.Timer // erofs: the read's completion, which queues the item

	tq    int64 // stats.Now() just before the queue call; written by the queueing goroutine
	delay int64 // requested delay in ns (delayed scenario), else 0
	lat   int64 // stats.Now() at the work function's first instruction - tq - delay
	cpu   int   // CPU the work function ran on (when wantCPU)

	wantCPU bool
	body    func(t *task) // the work itself: verify, decompress, submit
	after   func(t *task) // completion notification, after body

	// Workload data, owned by whoever holds the task at the time.
	blk  int64
	buf  []byte
	out  []byte
	err  error
	done chan struct{} // cap 1: signalled by after for waiting scenarios
	busy atomic.Bool   // submit scenario: the slot is in flight
}

// exec is the work function. Its first instruction takes the timestamp.
func (t *task) exec() {
	start := stats.Now()
	t.lat = start - t.tq - t.delay
	if t.wantCPU {
		t.cpu = labsys.CurrentCPU()
	}
	if t.body != nil {
		t.body(t)
	}
	t.after(t)
}

func newTask(body func(*task), after func(*task)) *task {
	t := &task{body: body, after: after, done: make(chan struct{}, 1)}
	t.fn = t.exec
	return t
}

func signalDone(t *task) { t.done <- struct{}{} }

// runner queues tasks on one configuration.
type runner interface {
	// prepare readies t for this runner (initialises its work item).
	prepare(t *task)
	// queue queues t to run now; false if it was refused.
	queue(t *task) bool
	// queueDelayed queues t to run after d; false if refused or not
	// supported.
	queueDelayed(t *task, d time.Duration) bool
	// close releases the queue or executor, waiting for its items.
	close()
}

// errSkip marks a row that cannot run here; the text is the reason.
type errSkip struct{ reason string }

func (e *errSkip) Error() string { return e.reason }

// newRunner creates the runner of row def. A row that cannot run on this
// machine (no privilege, no kthread package) returns an *errSkip.
func newRunner(scn string, def rowDef, workers int) (runner, error) {
	switch def.Kind {
	case KindGowq:
		q, err := wq.Alloc("wqlab-"+scn+"-"+def.ID, def.Flags, maxActiveFor(scn))
		if err != nil {
			if errors.Is(err, wq.ErrPermission) {
				return nil, &errSkip{permissionReason(def.Class)}
			}
			return nil, fmt.Errorf("wq.Alloc(%s): %w", def.Flags, err)
		}
		return &wqRunner{q: q, delayed: scn == Delayed}, nil
	case KindKthread:
		return newKthreadRunner(scn, def)
	case KindBaseline:
		e, err := baseline.New(def.ID, workers)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", def.ID, err)
		}
		return &baselineRunner{e: e}, nil
	}
	return nil, fmt.Errorf("unknown kind %q", def.Kind)
}

func permissionReason(c Class) string {
	switch c {
	case ClassRT:
		return "SCHED_FIFO not permitted (needs CAP_SYS_NICE or RLIMIT_RTPRIO >= 1)"
	case ClassHighPri:
		return "nice -20 not permitted (needs CAP_SYS_NICE or RLIMIT_NICE >= 40)"
	}
	return "not permitted"
}

// maxActiveFor returns the max_active of the scenario's queues: erofs
// uses the kernel's onlinecpus + onlinecpus/4, the others the default.
func maxActiveFor(scn string) int {
	if scn == Erofs {
		n := runtime.NumCPU()
		return n + n/4
	}
	return 0
}

// baselineWorkers is the worker count of the pooled baselines: as many as
// the gowq per-CPU pools would use for the scenario's concurrency.
func baselineWorkers() int { return max(2, runtime.NumCPU()) }

type wqRunner struct {
	q       *wq.Workqueue
	delayed bool
}

func (r *wqRunner) prepare(t *task) {
	t.w.Init(t.fn)
	if r.delayed {
		t.dw.Init(t.fn)
	}
}
func (r *wqRunner) queue(t *task) bool { return r.q.Queue(&t.w) }

// queueBatch queues ws with one QueueBatch call and returns how many it
// queued.
func (r *wqRunner) queueBatch(ws []*wq.Work) int { return r.q.QueueBatch(ws...) }
func (r *wqRunner) queueDelayed(t *task, d time.Duration) bool {
	return r.q.QueueDelayed(&t.dw, d)
}
func (r *wqRunner) close() { r.q.Destroy() }

type baselineRunner struct{ e baseline.Executor }

func (r *baselineRunner) prepare(t *task) {
	t.submit = func() {
		if r.e.Submit(t.fn) != nil {
			// Closed under us: report the item as lost, never hang.
			t.lat = -1
			t.after(t)
		}
	}
}
func (r *baselineRunner) queue(t *task) bool { return r.e.Submit(t.fn) == nil }

// queueDelayed is what Go code does for delayed work: a timer whose
// callback submits the item.
func (r *baselineRunner) queueDelayed(t *task, d time.Duration) bool {
	time.AfterFunc(d, t.submit)
	return true
}
func (r *baselineRunner) close() { r.e.Close() }
