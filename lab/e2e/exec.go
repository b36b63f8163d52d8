package e2e

import (
	"errors"
	"fmt"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
	"github.com/gowq/wq/lab/baseline"
)

// Executor runs a block's check and decompression for the FUSE file
// system. Run hands fn over and returns at once; fn then runs exactly
// once, or Run returns an error and fn never runs. Close waits for every
// accepted fn.
type Executor interface {
	Run(fn func()) error
	Close()
}

// The executors of the Go rows, by row ID.
const (
	ExecInline    = "inline"        // in go-fuse's handler goroutine
	ExecAnts      = "ants"          // ants/v2 pool of GOMAXPROCS workers
	ExecDefault   = "wq-default"    // gowq's default (unbound, normal) queue
	ExecRTPerCPU  = "wq-rt-percpu"  // gowq RT|PerCPU
	ExecRTUnbound = "wq-rt-unbound" // gowq RT|Unbound (cpu scope, strict)
	ExecKthread   = "kthread-fifo"  // seed 003's per-CPU kthread_workers, SCHED_FIFO-low
	RowKernel     = "kernel-erofs"  // the kernel's EROFS (LZ4) on a loop device
)

// ExecIDs are the Go rows' executors in table order.
var ExecIDs = []string{ExecInline, ExecAnts, ExecDefault, ExecRTPerCPU, ExecRTUnbound, ExecKthread}

// ErrPermission is wrapped when an executor needs a privilege this
// process lacks (SCHED_FIFO).
var ErrPermission = errors.New("e2e: not permitted")

// inline runs fn in the caller.
type inline struct{}

func (inline) Run(fn func()) error { fn(); return nil }
func (inline) Close()              {}

type antsExec struct{ a *baseline.Ants }

func (e antsExec) Run(fn func()) error { return e.a.Submit(fn) }
func (e antsExec) Close()              { e.a.Close() }

type wqExec struct{ q *wq.Workqueue }

func (e wqExec) Run(fn func()) error { return e.q.Go(fn) }
func (e wqExec) Close()              { e.q.Destroy() }

type kthreadExec struct {
	set *kthread.PerCPU
	fb  *wq.Workqueue
}

func (e kthreadExec) Run(fn func()) error {
	if !e.set.QueueLocal(kthread.NewWork(fn)) {
		return errors.New("e2e: kthread set refused the item")
	}
	return nil
}

func (e kthreadExec) Close() {
	e.set.Destroy()
	e.fb.Destroy()
}

// NewExecutor returns the executor of row id (one of ExecIDs), with
// workers for a machine of procs CPUs where it has a pool. An RT
// executor that the process may not create returns an error wrapping
// ErrPermission.
func NewExecutor(id string, procs int) (Executor, error) {
	perm := func(err error) error {
		if errors.Is(err, wq.ErrPermission) || errors.Is(err, kthread.ErrPermission) {
			return fmt.Errorf("%w: %v", ErrPermission, err)
		}
		return err
	}
	switch id {
	case ExecInline:
		return inline{}, nil
	case ExecAnts:
		a, err := baseline.NewAnts(max(procs, 1))
		if err != nil {
			return nil, err
		}
		return antsExec{a}, nil
	case ExecDefault:
		q, err := wq.Alloc("e2e-default", wq.Unbound, 0)
		if err != nil {
			return nil, err
		}
		return wqExec{q}, nil
	case ExecRTPerCPU, ExecRTUnbound:
		fl := wq.PerCPU | wq.RT
		if id == ExecRTUnbound {
			fl = wq.Unbound | wq.RT
		}
		q, err := wq.Alloc("e2e-"+id, fl, 0)
		if err != nil {
			return nil, perm(err)
		}
		return wqExec{q}, nil
	case ExecKthread:
		fb, err := wq.Alloc("e2e-kthread-fb", wq.Unbound|wq.HighPri, 0, wq.AllowRTFallback())
		if err != nil {
			return nil, err
		}
		set, err := kthread.NewPerCPU("e2e-kthread", wqfallback.Queue(fb), kthread.WithFIFOLow())
		if err != nil {
			fb.Destroy()
			return nil, perm(err)
		}
		return kthreadExec{set, fb}, nil
	}
	return nil, fmt.Errorf("e2e: unknown executor %q (want one of %v)", id, ExecIDs)
}
