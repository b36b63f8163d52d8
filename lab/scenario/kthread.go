package scenario

import (
	"errors"
	"fmt"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/kthread/wqfallback"
)

// kthreadRunner queues on seed 003's per-CPU kthread_worker set: the
// worker of the CPU the caller runs on (QueueLocal, the seed's
// raw_smp_processor_id()), with an UNBOUND|HIGHPRI fallback queue.
type kthreadRunner struct {
	set *kthread.PerCPU
	fb  *wq.Workqueue
}

func newKthreadRunner(scn string, def rowDef) (runner, error) {
	name := "wqlab-" + scn + "-" + def.ID
	// Our own fallback, so that the normal-class row also runs where nice
	// -20 is not permitted (it then falls back to nice 0).
	fb, err := wq.Alloc(name+"-fb", wq.Unbound|wq.HighPri, 0, wq.AllowRTFallback())
	if err != nil {
		return nil, fmt.Errorf("fallback workqueue: %w", err)
	}
	var opts []kthread.Option
	if def.Class == ClassRT {
		opts = append(opts, kthread.WithFIFOLow())
	}
	set, err := kthread.NewPerCPU(name, wqfallback.Queue(fb), opts...)
	if err != nil {
		fb.Destroy()
		if errors.Is(err, kthread.ErrPermission) || errors.Is(err, wq.ErrPermission) {
			return nil, &errSkip{permissionReason(def.Class)}
		}
		return nil, fmt.Errorf("kthread.NewPerCPU: %w", err)
	}
	return &kthreadRunner{set: set, fb: fb}, nil
}

func (r *kthreadRunner) prepare(t *task)    { t.kw = kthread.NewWork(t.fn) }
func (r *kthreadRunner) queue(t *task) bool { return r.set.QueueLocal(t.kw) }

// queueDelayed is not offered: no scenario measures kthread delayed work.
func (r *kthreadRunner) queueDelayed(*task, time.Duration) bool { return false }

func (r *kthreadRunner) close() {
	r.set.Destroy()
	r.fb.Destroy()
}
