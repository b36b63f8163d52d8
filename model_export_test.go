package wq

// Read-only views of an item's internal state for the model test: they let
// the test wait, without side effects, for a state that the public API does
// not show (a sync canceller holding the item, a timer that has fired and
// linked its item).

// Cancelers returns how many CancelSync/DisableSync calls hold w now.
func (w *Work) Cancelers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cancelers
}

// Held reports whether a sync canceller holds w (CANCELING).
func (w *Work) Held() bool { return w.state.Load()&stCanceling != 0 }

// DisableDepth returns w's disable count.
func (w *Work) DisableDepth() int { return int(w.state.Load()&stDisableMask) >> stDisableShift }

// Linked reports whether w is on a list of a pwq (worklist or inactive).
func (w *Work) Linked() bool { return w.pwq.Load() != nil }

// Armed reports whether dw's timer is armed on a queue.
func (dw *DelayedWork) Armed() bool {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.armedOn != nil
}

// FlushWaiters returns how many Flush calls wait for w now.
func (w *Work) FlushWaiters() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.waiters)
}
