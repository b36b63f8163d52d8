// Package e2e is the lab's end-to-end experiment (`wqlab --scenario e2e`,
// and e2e-seq for sequential reads): what fio, the kernel's own client,
// sees of a read through a file system that decompresses each block, on
// each executor, beside the kernel's EROFS doing the same.
//
// # Rows
//
// The Go rows are one read-only go-fuse file system each (DirectMount,
// so root and /dev/fuse are needed; no fusermount), serving the same
// Container: every file cut into 16 KiB blocks, each LZ4-compressed and
// listed by the SHA-256 of its stored bytes in a table whose own SHA-256
// is the root (a one-level hash tree, checked once at mount). A read
// checks every block it touches against the table and decompresses it on
// the row's executor while go-fuse's handler goroutine waits: inline (in
// the handler), ants, gowq's default queue, gowq RT per-CPU, gowq RT
// unbound strict, and seed 003's per-CPU kthread_workers at SCHED_FIFO-low.
// go-fuse starts its request-reading goroutines itself, so no row can put
// the FUSE request loop on an RT thread.
//
// The kernel row is an EROFS image of the same tree (`mkfs.erofs
// -zlz4hc`) on a loop device attached read-only with autoclear, mounted
// with cache_strategy=disabled so that every uncached page is read and
// decompressed again.
//
// The file fio reads is the lab's erofs corpus ($GOROOT/src, 32 MiB) as
// one stream. Every row's file is read back whole and compared with its
// source before it is measured; a row whose bytes differ is skipped.
// fio runs psync 4 KiB reads (random, or sequential), one pass per row
// and round with invalidate=1, so that every pass starts with the file's
// pages dropped. Rows alternate in rounds under each load (idle, the
// cpuio burners, seed 004's nice -20 hogs), and each table gives fio's
// clat, each round's p99, and a one-line verdict with the rounds' range.
//
// # Never leave a mount behind
//
// A Session owns the run's mounts under /run/gowq-e2e/<pid>-<start
// time>. Every exit of Run closes it: the normal end, a failed row, a
// panic in Run's goroutine, its context's end, and SIGINT, SIGTERM,
// SIGHUP, SIGQUIT and SIGPIPE. A FUSE unmount is forced (which aborts the
// connection) and lazy. /dev/fuse descriptors are close-on-exec, set
// while syscall.ForkLock is held, and fio (which runs its job as a
// thread) and mkfs.erofs have SIGKILL as their parent-death signal, so
// that no child outlives the run holding a mount's file or connection,
// or writing into its session. After a SIGKILL, the next start's
// Cleanup finds the sessions whose process is gone (or a zombie),
// unmounts what they left, releases their loop devices (reporting a busy
// one as set to autoclear, with who holds it, not as released) and
// removes their directories; live sessions are left alone, and reported
// (a concurrent run's passes share the CPUs with this one's).
package e2e
