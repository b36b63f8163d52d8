package wq

// ForceThreads sets the process-wide switch that GOWQ_THREADS=1 sets
// (every pool thread-backed) for queues allocated or reconfigured from now
// on, and returns the function that restores the previous setting.
func ForceThreads(on bool) (undo func()) {
	old := forceThreads.Swap(on)
	return func() { forceThreads.Store(old) }
}
