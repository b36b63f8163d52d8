package wq

import "sync"

// poolService is a background goroutine that runs while at least one pool
// is registered with it: the CM monitor and the watchdog. The goroutine
// starts with the first pool and is stopped, and waited for, when the last
// one leaves, so an idle process keeps none of gowq's goroutines.
type poolService[V any] struct {
	mu    sync.Mutex
	pools map[*pool]V   // guarded by mu
	stop  chan struct{} // guarded by mu: nil when the goroutine is not running
	done  chan struct{} // guarded by mu: closed by the goroutine when it ends
}

// register adds p with its per-pool state v and, for the first pool, calls
// start(stop, done), which must start the goroutine and not block.
func (s *poolService[V]) register(p *pool, v V, start func(stop, done chan struct{})) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pools == nil {
		s.pools = make(map[*pool]V)
	}
	s.pools[p] = v
	if s.stop == nil {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		start(s.stop, s.done)
	}
}

// unregister removes p; after the last pool it stops the goroutine and
// waits for it to end.
func (s *poolService[V]) unregister(p *pool) {
	s.mu.Lock()
	delete(s.pools, p)
	if len(s.pools) > 0 || s.stop == nil {
		s.mu.Unlock()
		return
	}
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.mu.Unlock()
	close(stop)
	<-done
}

// each calls fn for every registered pool, with the service's lock held;
// fn must not block or take a pool lock.
func (s *poolService[V]) each(fn func(p *pool, v V)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, v := range s.pools {
		fn(p, v)
	}
}
