package wq

// SetAttrQueues writes attribute name of every queue in qs (see SetAttr
// for names and formats), all or nothing: when one queue refuses the
// value, the queues already written get back exactly the state they had
// (every attribute, and the worker class in force, which ApplyAttrs of a
// saved Attrs cannot always restore: a HighPri queue keeps the meaning
// highpri_policy had when it got its class), and the first error is
// returned. Attribute writes of other goroutines (SetAttr, ApplyAttrs,
// the typed setters, the process-wide setters) wait meanwhile, so none
// is lost to a restore. Errors are those of SetAttr; a queue Destroy began
// on refuses with ErrDestroyed. It serves several queues of one name
// (wqhttp's /attrs/<name>/<attr>: the kernel's sysfs names are unique,
// gowq's queue names need not be). Blocks for the probe threads, as
// SetAttr does. Safe from any goroutine.
func SetAttrQueues(qs []*Workqueue, name, value string) error {
	attrMu.Lock()
	defer attrMu.Unlock()
	type done struct {
		q  *Workqueue
		st attrsState
	}
	var written []done
	for _, q := range qs {
		e, err := q.writableAttr(name)
		if err == nil {
			q.mu.Lock()
			st := q.stateLocked()
			q.mu.Unlock()
			if err = q.applyAttrsLocked(name, func(a *Attrs) error { return e.set(q, a, value) }); err == nil {
				written = append(written, done{q, st})
			}
		}
		if err != nil {
			for i := len(written) - 1; i >= 0; i-- {
				written[i].q.restoreState(written[i].st)
			}
			return err
		}
	}
	return nil
}
