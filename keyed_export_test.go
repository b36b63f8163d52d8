package wq

// KeyStates returns the keys with keyed instances in flight on q and the
// key states it holds (in its maps and free lists).
func (q *Workqueue) KeyStates() (keys, held int) { return q.keyStates() }

// KeyedInFlight returns q's count of keyed instances in flight.
func (q *Workqueue) KeyedInFlight() int64 { return q.keyedN.Load() }
