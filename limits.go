package wq

// checkThreadHeadroom reports an error when creating one more worker thread
// could hit a thread limit (RLIMIT_NPROC, a pids cgroup's pids.max): the Go
// runtime aborts the whole process when it cannot create a thread, so gowq
// must stop short of the limit and treat the creation as failed. Called
// with the pool lock held, before each worker creation. Filled in by the
// thread-limit work; nil means there is headroom.
func checkThreadHeadroom() error { return nil }
