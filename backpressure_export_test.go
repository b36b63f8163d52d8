package wq

// PendingCount returns q's MaxPending count (backpressure.go), for tests.
func (q *Workqueue) PendingCount() int64 { return q.bp.n.Load() }

// RoomWaiters returns the number of QueueContext calls waiting for room.
func (q *Workqueue) RoomWaiters() int { return int(q.bp.waiters.Load()) }
