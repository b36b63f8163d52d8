// Package sched is the only place in gowq that makes system calls about
// threads: thread ids, CPU affinity, nice, scheduling policy, thread names,
// per-thread CPU clocks and run state, the current CPU, and the futex-based
// wake primitive that parks and wakes worker threads.
//
// Every function here acts on one OS thread, named by its tid. Callers that
// change the calling thread's attributes must hold runtime.LockOSThread and
// must never unlock it afterwards (see docs/HACKING.md): a thread whose
// policy, nice or affinity was changed must die with its goroutine.
package sched
