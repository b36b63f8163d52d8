package wq

// IsChainedWork reports whether the caller is one of q's items, running on
// a worker (or the rescuer) of q: a wait for q to drain or be destroyed
// would then wait for the caller itself. Destroy returns without
// destroying in that case (ErrDeadlock); owners of a queue that destroy it
// on behalf of others (kthread's PerCPU fallback) check it first. It costs
// a gettid and a map lookup, and about 2 us more when the caller runs on a
// worker's thread; it never blocks. Safe from any goroutine. Mirrors
// is_chained_work().
func (q *Workqueue) IsChainedWork() bool { return q.isChained() }
