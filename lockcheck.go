//go:build !wqdebug

package wq

// The pool lock's check (lockdep_assert_held(&pool->lock) in the kernel).
// Built with the wqdebug tag (lockcheck_debug.go), a pool lock records
// the goroutine that holds it and assertHeld panics when its caller does
// not hold it. In every other build lockOwner is empty and every check is
// written
//
//	if lockdep {
//		p.assertHeld()
//	}
//
// with lockdep a false constant, which the compiler removes before it
// weighs a function for inlining: the code is the same instruction for
// instruction as without the check (a bare call to an empty method would
// still count against the caller's inlining budget, and cost a nil check
// where the method is reached through a field).

// lockdep is true in wqdebug builds: the pool lock's holder is checked.
const lockdep = false

// lockOwner is empty without the wqdebug tag.
type lockOwner struct{}

func (*lockOwner) set()   {}
func (*lockOwner) clear() {}

// assertHeld checks that the caller holds p's lock, p.mu (wqdebug builds
// only). It is called first in the policy functions (policy.go), in
// setCounted, and in the functions whose comment says the pool lock is
// held, always behind "if lockdep".
func (*pool) assertHeld() {}
