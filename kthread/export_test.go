package kthread

// Test hooks: simulate hotplug without narrowing the test process's own
// affinity, and observe internal states without sleeping.

// ApplyOnline makes the set act as if the online CPUs were online, as the
// wq.OnCPUChange subscriber does.
func (s *PerCPU) ApplyOnline(online []int) { s.apply(online) }

// WaitRetired waits until workers retired by hotplug have been destroyed.
func (s *PerCPU) WaitRetired() { s.retiring.Wait() }

// Canceling returns how many cancel-sync calls wait for w's running
// instance.
func Canceling(w *Work) int {
	o := w.lockOwner()
	if o == nil {
		return 0
	}
	defer o.mu.Unlock()
	return w.canceling
}

// Dying reports whether Destroy has begun on wk.
func Dying(wk *Worker) bool {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return wk.dying
}

// Owner returns the worker w is attached to (nil if none, or the
// fallback).
func Owner(w *Work) *Worker {
	o := w.owner.Load()
	if o != nil && o.fallback != nil {
		return nil
	}
	return o
}

// OnFallback reports whether w is attached to a PerCPU set's fallback.
func OnFallback(w *Work) bool {
	o := w.owner.Load()
	return o != nil && o.fallback != nil
}

// Queued returns the length of wk's worklist (items and flush barriers).
func Queued(wk *Worker) int {
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return wk.worklist.Len()
}

// ArmedOnRT reports whether dw is on its worker's delayed list with its
// timer armed on an RT timer base (the RT timer thread).
func ArmedOnRT(dw *DelayedWork) bool {
	o := dw.lockOwner()
	if o == nil {
		return false
	}
	defer o.mu.Unlock()
	return dw.list() == &o.delayed && dw.timer.OnRT()
}
