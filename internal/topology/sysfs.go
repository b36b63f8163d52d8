package topology

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/procfs/sysfs"
)

// Source produces topology snapshots. Read returns a new, immutable
// *Topology describing the system now, or an error; it may block for file
// I/O. Implementations must be safe for use by one goroutine at a time
// (Watcher serialises its calls).
type Source interface {
	Read() (*Topology, error)
}

// ErrNoCPUs is returned, wrapped, by SysfsSource.Read when the intersection
// of the online CPUs, the process affinity and the cgroup cpuset is empty.
var ErrNoCPUs = errors.New("topology: no usable CPU")

// StaticSource is a Source that returns T, for tests and for injecting a
// topology. Set T before the source is shared; afterwards change it with Set
// to simulate a hotplug event. Use it as a pointer.
type StaticSource struct {
	T *Topology // guarded by mu once the source is shared

	mu sync.Mutex
}

// Read returns the current T and a nil error; it does not block beyond a
// mutex. Safe for concurrent use with Set.
func (s *StaticSource) Read() (*Topology, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.T, nil
}

// Set replaces T; the next Read returns t. Safe for concurrent use.
func (s *StaticSource) Set(t *Topology) {
	s.mu.Lock()
	s.T = t
	s.mu.Unlock()
}

// SysfsSource reads the topology of the running system from sysfs and
// procfs under Root. Use it as a pointer; the zero value reads the real
// system. Do not change its fields after the first Read.
//
// Online is the intersection of
//   - /sys/devices/system/cpu/online (the kernel's cpu_online_mask),
//   - the process affinity (Affinity, by default ProcessAffinity: the main
//     thread's mask, see there why), and
//   - the effective cpuset of the process's cgroups, when readable (see
//     below); the kernel already applies it to the affinity, this is a
//     second line of defence.
//
// Per online CPU it reads the SMT siblings from
// cpuN/topology/thread_siblings_list, the last-level cache from the
// highest-level data or unified cache in cpuN/cache/indexK/{level,type,
// shared_cpu_list}, and NUMA membership from
// /sys/devices/system/node/nodeN/cpulist. Missing files, common in
// containers, degrade gracefully: without topology a CPU is its own SMT
// core, without cache information a CPU's cache group is its NUMA node,
// without node directories every CPU is in node 0, and without the online
// file the cpuN directories (with their online flag) or, failing those, the
// process affinity define the online set. Files that exist but do not parse
// make Read fail.
//
// The cgroup cpuset is found through <Root>/proc/self/cgroup: cgroup v2's
// cpuset.cpus.effective under <Root>/sys/fs/cgroup or
// <Root>/sys/fs/cgroup/unified, or cgroup v1's cpuset.effective_cpus under
// <Root>/sys/fs/cgroup/cpuset; cgroup file systems mounted elsewhere are
// not found.
//
// The per-CPU layout (cores, caches, nodes) is read again only when the
// kernel's online mask differs from the previous Read; reading the affinity
// and the cgroup costs one system call and a few small file reads per Read.
// Read is safe for concurrent use.
type SysfsSource struct {
	// Root is the directory that holds sys/ and proc/; "" means "/".
	// Point it at a fake tree to test.
	Root string
	// Affinity returns the process affinity; nil means ProcessAffinity.
	// Tests that read a fake tree set it so that the affinity of the test
	// process does not narrow the fake CPUs.
	Affinity func() (CPUSet, error)

	mu     sync.Mutex
	cached *layout // guarded by mu
}

// layout is the per-CPU data read from sysfs for one kernel online mask.
type layout struct {
	key             string
	core, llc, node map[int]int
}

// Read returns a snapshot of the current topology. It blocks for a few
// dozen small file reads (more after a CPU hotplug). It returns an error
// when a sysfs or cgroup file is malformed, when the affinity cannot be
// read, or, wrapping ErrNoCPUs, when no CPU is usable.
func (s *SysfsSource) Read() (*Topology, error) {
	root := s.Root
	if root == "" {
		root = "/"
	}
	cpuDir := filepath.Join(root, "sys/devices/system/cpu")

	affFn := s.Affinity
	if affFn == nil {
		affFn = ProcessAffinity
	}
	aff, err := affFn()
	if err != nil {
		return nil, err
	}

	base, sysOK, err := readOnline(cpuDir)
	if err != nil {
		return nil, err
	}
	possible := base
	if !sysOK {
		base = aff
		possible = aff
	} else if p, ok, err := readListFile(filepath.Join(cpuDir, "possible")); err != nil {
		return nil, err
	} else if ok {
		possible = p.Or(base)
	}

	online := aff.And(base)
	cg, cgOK, err := cgroupCPUs(root)
	if err != nil {
		return nil, err
	}
	if cgOK {
		online = online.And(cg)
	}
	if online.IsEmpty() {
		return nil, fmt.Errorf("%w: online %q, affinity %q, cgroup cpuset %q (found %v)",
			ErrNoCPUs, base, aff, cg, cgOK)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	key := base.String()
	if s.cached == nil || s.cached.key != key {
		l, err := readLayout(root, cpuDir, base)
		if err != nil {
			return nil, err
		}
		l.key = key
		s.cached = l
	}
	l := s.cached
	nodeOf := func(c int) int { return l.node[c] } // 0 when unknown
	return newTopology(online, possible,
		func(c int) int { return l.core[c] },
		func(c int) int { return l.llc[c] },
		nodeOf), nil
}

// readListFile reads a file in CPU list format. ok is false when the file
// cannot be read; err is set when it is read but does not parse.
func readListFile(file string) (set CPUSet, ok bool, err error) {
	b, rerr := os.ReadFile(file)
	if rerr != nil {
		return CPUSet{}, false, nil
	}
	set, err = ParseList(string(b))
	if err != nil {
		return CPUSet{}, false, fmt.Errorf("topology: %s: %w", file, err)
	}
	return set, true, nil
}

// readOnline returns the kernel's online CPUs: the online file, else the
// cpuN directories whose online flag is 1 or absent (cpu0 often has none).
func readOnline(cpuDir string) (CPUSet, bool, error) {
	if set, ok, err := readListFile(filepath.Join(cpuDir, "online")); ok || err != nil {
		return set, ok, err
	}
	paths, err := filepath.Glob(filepath.Join(cpuDir, "cpu[0-9]*"))
	if err != nil {
		return CPUSet{}, false, nil
	}
	var ids []int
	for _, p := range paths {
		c := sysfs.CPU(p)
		id, err := strconv.Atoi(c.Number())
		if err != nil {
			continue
		}
		if on, err := c.Online(); on || errors.Is(err, os.ErrNotExist) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return CPUSet{}, false, nil
	}
	return NewCPUSet(ids...), true, nil
}

// readLayout reads cores, last-level caches and nodes of the CPUs of base.
func readLayout(root, cpuDir string, base CPUSet) (*layout, error) {
	l := &layout{core: map[int]int{}, llc: map[int]int{}, node: map[int]int{}}

	nodeDirs, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	for _, d := range nodeDirs {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		cpus, ok, err := readListFile(filepath.Join(d, "cpulist"))
		if err != nil {
			return nil, err
		}
		if ok {
			for c := range cpus.All() {
				l.node[c] = id
			}
		}
	}

	for c := range base.All() {
		cpuPath := filepath.Join(cpuDir, "cpu"+strconv.Itoa(c))

		l.core[c] = c
		siblings, ok, err := readSiblings(cpuPath)
		if err != nil {
			return nil, err
		}
		if ok && siblings.Has(c) {
			l.core[c] = siblings.First()
		}

		// Key spaces: a cache group is named by its first CPU (>= 0), the
		// node fallback by -1-node, so the two never collide.
		l.llc[c] = -1 - l.node[c]
		shared, ok, err := readLLC(filepath.Join(cpuPath, "cache"))
		if err != nil {
			return nil, err
		}
		if ok && shared.Has(c) {
			l.llc[c] = shared.First()
		}
	}
	return l, nil
}

// readSiblings returns the SMT siblings of the CPU at cpuPath, through
// procfs's sysfs package, or a plain read where procfs cannot (it requires
// all of core_id, physical_package_id and the sibling lists).
func readSiblings(cpuPath string) (CPUSet, bool, error) {
	file := filepath.Join(cpuPath, "topology", "thread_siblings_list")
	if t, err := sysfs.CPU(cpuPath).Topology(); err == nil {
		set, err := ParseList(t.ThreadSiblingsList)
		if err != nil {
			return CPUSet{}, false, fmt.Errorf("topology: %s: %w", file, err)
		}
		return set, true, nil
	}
	return readListFile(file)
}

// readLLC returns the CPUs sharing the last-level cache described under
// cacheDir: the data or unified cache of the highest level.
func readLLC(cacheDir string) (CPUSet, bool, error) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return CPUSet{}, false, nil
	}
	bestLevel, best := -1, ""
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		dir := filepath.Join(cacheDir, e.Name())
		typ, err := os.ReadFile(filepath.Join(dir, "type"))
		if err != nil || strings.TrimSpace(string(typ)) == "Instruction" {
			continue
		}
		lv, err := os.ReadFile(filepath.Join(dir, "level"))
		if err != nil {
			continue
		}
		level, err := strconv.Atoi(strings.TrimSpace(string(lv)))
		if err != nil {
			return CPUSet{}, false, fmt.Errorf("topology: %s/level: %w: %q", dir, ErrSyntax, lv)
		}
		if level > bestLevel {
			bestLevel, best = level, dir
		}
	}
	if best == "" {
		return CPUSet{}, false, nil
	}
	if set, ok, err := readListFile(filepath.Join(best, "shared_cpu_list")); ok || err != nil {
		return set, ok, err
	}
	file := filepath.Join(best, "shared_cpu_map")
	b, err := os.ReadFile(file)
	if err != nil {
		return CPUSet{}, false, nil
	}
	set, err := ParseMask(string(b))
	if err != nil {
		return CPUSet{}, false, fmt.Errorf("topology: %s: %w", file, err)
	}
	return set, true, nil
}
