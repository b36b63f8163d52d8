package wq

// StageStamps returns w's queue-side stage stamps (stages.go).
func (w *Work) StageStamps() (queue, locked int64) { return w.stQueue, w.stLocked }
