// Package timer is the one-shot timer behind the delayed work of package
// wq (DelayedWork) and of package kthread (DelayedWork): the kernel's
// struct timer_list as both use it. A Timer calls its function once per
// arming, after the delay, on one of two backends chosen at each arming:
//
//   - Go (nil *RT): a Go timer (time.AfterFunc, created once by Init). It
//     fires when an ordinary Go thread gets a CPU, which under CPU load can
//     be milliseconds late. Normal and high-priority classes use it.
//   - RT: a timer thread per CPU and SCHED_FIFO priority (the PREEMPT_RT
//     kernel's ktimers/N threads), pinned to its CPU, which keeps a
//     min-heap of deadlines and sleeps until the earliest with one
//     absolute-deadline futex wait (sched.Parker.ParkUntil). Arming an
//     earlier deadline wakes it through the same futex word. It runs the
//     expired timers' functions itself, at its RT priority, on the CPU the
//     timer was armed for, so a delayed item of an RT class is queued
//     within the kernel's wake-up latency of its deadline even when every
//     ordinary thread is starved, and its RT worker on that CPU is woken
//     without a cross-CPU wake-up.
//
// Arming and stopping never allocate (the heap index lives in the Timer;
// a heap's array only grows to the most timers ever armed on it at once)
// and never block beyond a leaf mutex. The threads of a priority exist
// while its RTSet is held (AcquireRT .. Release), one per CPU that armed
// a timer, and sleep with no deadline while nothing is armed, so an idle
// process pays no wake-up for them.
package timer

import (
	"time"

	"github.com/gowq/wq/internal/sched"
)

// Timer is a one-shot timer whose function runs once per arming. Reset and
// Stop must be serialised by the caller (wq and kthread call both with the
// item's lock held); the function runs without that lock, on a Go timer
// goroutine or on an RT timer thread. The zero value is not usable: call
// Init. A Timer must not be copied after Init.
type Timer struct {
	fn func()
	gt *time.Timer // Go backend, created by the first Init

	rt *RT // backend of the latest arming, nil for Go; serialised by the caller

	// RT backend state, guarded by rt.mu.
	when int64 // deadline, CLOCK_MONOTONIC ns
	idx  int   // index in rt.heap, -1 when not in it
}

// Init sets the function the timer calls when it expires and allocates
// the Go timer. Only the first Init does anything: a later one keeps the
// first function (wq and kthread always pass their item's own timer
// function), because a call of an earlier arming, stopped too late, may
// still be on its way and read it. The timer must not be armed. Mirrors
// timer_setup().
func (t *Timer) Init(fn func()) {
	if t.gt != nil {
		return
	}
	t.fn = fn
	t.idx = -1
	t.gt = time.AfterFunc(time.Hour, t.fire)
	t.gt.Stop()
}

func (t *Timer) fire() { t.fn() }

// Ready reports whether Init was called.
func (t *Timer) Ready() bool { return t.gt != nil }

// Reset arms the timer to call its function after d (d <= 0: as soon as
// the backend runs), on the RT base rt, or on a Go timer when rt is nil.
// The timer must not be armed (never armed, stopped, or its function
// already started: then that call still happens, and this arming makes
// one more). It never blocks beyond rt's leaf mutex and never allocates
// (except to grow rt's heap past its largest size yet). Mirrors
// add_timer().
func (t *Timer) Reset(d time.Duration, rt *RT) {
	t.rt = rt
	if rt == nil {
		t.gt.Reset(d)
		return
	}
	rt.add(t, Deadline(sched.MonoNow(), d))
}

// Stop disarms the timer. It returns true if it stopped an armed timer:
// its function will not be called for that arming. It returns false when
// the timer was not armed, or its function has already started or is
// about to (it then runs once more). Never blocks beyond the RT base's
// leaf mutex. Mirrors timer_delete() (del_timer).
func (t *Timer) Stop() bool {
	if t.rt == nil {
		return t.gt != nil && t.gt.Stop()
	}
	return t.rt.del(t)
}

// OnRT reports whether the latest arming used an RT base. Serialised by
// the caller like Reset.
func (t *Timer) OnRT() bool { return t.rt != nil }
