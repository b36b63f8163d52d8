//go:build wqdebug

package wq

import (
	"errors"
	"testing"
)

// TestAssertHeld: in a wqdebug build, the policy functions, setCounted and
// the functions documented as called with the pool lock held panic when
// the caller does not hold that lock: neither when it is free, nor when
// another goroutine holds it; they do not when the caller holds it. Fault
// caught: a check that is stubbed out, or that looks only at whether the
// lock is taken and not by whom.
func TestAssertHeld(t *testing.T) {
	newPool := func() *pool {
		p := &pool{key: poolKey{cpu: -1}, cpus: []int{0, 1}, lastQueueCPU: -1, mayspin: true}
		p.mu.owner = nil // a bare pool: no incoming stack to drain
		return p
	}
	calls := map[string]func(p *pool){
		"concurrency":     func(p *pool) { p.concurrency() },
		"needMoreWorker":  func(p *pool) { p.needMoreWorker() },
		"keepWorking":     func(p *pool) { p.keepWorking() },
		"mayStartWorking": func(p *pool) { p.mayStartWorking() },
		"workersToStart":  func(p *pool) { p.workersToStart() },
		"needToCreate":    func(p *pool) { p.needToCreate() },
		"needThisWorker":  func(p *pool) { p.needThisWorker(false) },
		"cmWakeHint":      func(p *pool) { p.idle = []*worker{{}}; p.cmWakeHint() },
		"spinnerTakes":    func(p *pool) { p.spinnerTakes() },
		"spinMissed":      func(p *pool) { p.spinMissed(&worker{}) },
		"wakeHint":        func(p *pool) { p.idle = []*worker{{}}; p.wakeHint() },
		"tooManyWorkers":  func(p *pool) { p.tooManyWorkers() },
		"spinOK":          func(p *pool) { p.spinOK(&worker{dying: true}) },
		"setCounted":      func(p *pool) { p.setCounted(&worker{}, false) },
		"pwq.setDead":     func(p *pool) { (&pwq{pool: p}).setDead(false) },
	}
	panics := func(fn func()) (err error) {
		defer func() {
			if r := recover(); r != nil {
				e, ok := r.(error)
				if !ok || !errors.As(e, new(lockNotHeld)) {
					panic(r)
				}
				err = e
			}
		}()
		fn()
		return nil
	}
	for name, call := range calls {
		p := newPool()
		if panics(func() { call(p) }) == nil {
			t.Errorf("%s without the pool lock: no panic", name)
		}

		p = newPool()
		p.mu.Lock()
		if err := panics(func() { call(p) }); err != nil {
			t.Errorf("%s with the pool lock held: %v", name, err)
		}
		// Held, but by another goroutine than the caller's.
		got := make(chan error, 1)
		go func() { got <- panics(func() { call(p) }) }()
		if <-got == nil {
			t.Errorf("%s with the pool lock held by another goroutine: no panic", name)
		}
		p.mu.Unlock()
		if panics(func() { call(p) }) == nil {
			t.Errorf("%s after the pool lock's Unlock: no panic", name)
		}
	}
}
