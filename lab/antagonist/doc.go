// Package antagonist generates the CPU load under which wqlab measures
// workqueue scheduling latency (DESIGN-NOTES section 4): the fio cpuio
// burners of seeds 000-003 and the pinned, reniced, optionally real-time
// hog of seed 004.
//
// # Children, not goroutines
//
// An antagonist must compete with the measured threads in the kernel's
// scheduler, with its own nice value, policy and affinity, and must not
// share the Go runtime (Ps, GC, sysmon) with them. So every antagonist is a
// child process: the parent re-executes its own binary (os.Executable)
// with the spec in the environment variable EnvVar (GOWQ_ANTAGONIST, JSON).
// A program that starts antagonists therefore calls MaybeRunChild first
// thing in main (tests: in TestMain); in a child it applies the spec and
// runs the load loop until killed, otherwise it returns at once. The
// package's init calls it too, so a child never runs the program's own
// code even where the call is missing.
//
// Each child runs with GOMAXPROCS=1 and GOGC=off: one load thread, like a
// C burner. The child applies affinity, nice and policy to every one of its
// threads (the kernel keeps them per thread, and the Go runtime may move
// the loop between its threads), then reports the result to the parent on
// a pipe; Burners and Hog return only after every child reported, with
// ErrPermission when a nice value or RT policy was refused. Nothing is
// silently degraded.
//
// # Lifetime
//
// A [Group] is the set of children of one start. [Group.Stop] sends SIGTERM
// to each child's process group, SIGKILL after StopGrace, and reaps
// everything: no zombies, no goroutines left. Children also die with the
// parent: they are started with Pdeathsig=SIGKILL from a dedicated
// OS-thread-locked goroutine, because Pdeathsig follows the forking thread,
// and in gowq goroutines that lock a thread and exit destroy it.
//
// # Measuring that the load was real
//
// [Group.Usage] reports the children's CPU time (live from /proc/<pid>/stat,
// exact from rusage after reaping) against wall time; [LoadMeter] reports
// per-CPU utilisation from /proc/stat between two samples.
//
// # Safety of real-time hogs
//
// A SCHED_FIFO/SCHED_RR hog that never sleeps leaves its CPU to others
// only through kernel RT throttling; [Hog] refuses one when throttling is
// off (ErrRTUnthrottled). See [HogSpec].
//
// # Fidelity to fio
//
// fio's cpuio engine in cpumode=qsort does not use fixed 50 ms cycles: its
// busy chunk is one round of four sorts of 256Ki int32 and its think time
// is busy*(100-load)/load, recomputed after every round; cpuchunks (50000
// us) is the chunk of cpumode=noop. ModeQsort and ModeNoop copy that.
// [Fio] runs the real fio where installed.
package antagonist
