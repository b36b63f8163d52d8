// Package topology tells the rest of gowq which CPUs it may use, how they
// share cores, caches and NUMA nodes, and when that changes (CPU hotplug,
// affinity or cpuset changes). It is a leaf package: it imports no other
// gowq package.
//
// # Model
//
// A CPUSet is an immutable set of CPU ids (the kernel's struct cpumask),
// printed and parsed in the kernel's list ("0-3,8") and mask ("ff",
// "1,00000003") formats. A Topology is an immutable snapshot: Online, the
// CPUs this process may run on (kernel online ∩ process affinity ∩ cgroup
// cpuset), Possible, and for each online CPU its SMT core, last-level cache
// and NUMA node. From these it derives the affinity pods of every Scope,
// mirroring the kernel's workqueue affinity scopes: cpu, smt, cache (the
// default), numa and system. Pods always partition Online, are sorted by
// their first CPU and are never empty.
//
// # Sources
//
// A Source produces snapshots. SysfsSource reads /sys/devices/system/cpu,
// /sys/devices/system/node, the process affinity and the cgroup cpuset,
// under a configurable root so that tests can point it at a fake tree
// (testdata/sysfs8). Missing files degrade gracefully (a container without
// cache or node directories gets one cache group per node and a single
// node). StaticSource and NewStatic inject a topology in tests.
//
// The process affinity is the main thread's mask, sched_getaffinity(getpid()),
// because affinity is per thread and gowq narrows its own worker threads;
// see ProcessAffinity for why, and for the rule this puts on the code that
// changes thread attributes (never the thread whose tid equals the pid).
//
// # Watching
//
// A Watcher holds the current snapshot behind an atomic pointer (Current is
// lock-free) and rescans its Source every interval (1 s by default), calling
// onChange(old, new) synchronously when the snapshot changes. Linux has no
// single cheap notification for hotplug, affinity and cpuset changes, so
// detection is polled: a change is seen at most one interval late, and a
// change undone within one interval can be missed. Callers must tolerate a
// CPU disappearing before they are told.
package topology
