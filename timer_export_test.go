package wq

// ArmedOnRT reports whether dw's timer is armed on an RT timer base (the
// RT timer thread) rather than on a Go timer; for the model test.
func (dw *DelayedWork) ArmedOnRT() bool {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return dw.armedOn != nil && dw.timer.OnRT()
}
