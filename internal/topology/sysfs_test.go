package topology

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

const fakeTree = "testdata/sysfs8"

// allCPUs is an affinity that does not narrow the fake tree.
func allCPUs() (CPUSet, error) { return rangeSet(0, 1023), nil }

// copyTree copies the fake tree to a temporary directory that the test may
// modify.
func copyTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(fakeTree)); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeGlob(t *testing.T, root, pattern string) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, pattern))
	if err != nil || len(paths) == 0 {
		t.Fatalf("glob %s: %v matches, err %v", pattern, len(paths), err)
	}
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}

func readTree(t *testing.T, root string, aff func() (CPUSet, error)) *Topology {
	t.Helper()
	topo, err := (&SysfsSource{Root: root, Affinity: aff}).Read()
	if err != nil {
		t.Fatalf("Read(%s): %v", root, err)
	}
	checkPartition(t, topo)
	return topo
}

func expectPods(t *testing.T, topo *Topology, want map[Scope][]string) {
	t.Helper()
	for sc := ScopeCPU; sc <= ScopeSystem; sc++ {
		w, ok := want[sc]
		if !ok {
			continue
		}
		if got := podStrings(topo.Pods(sc)); !slices.Equal(got, w) {
			t.Errorf("Pods(%v) = %v, want %v", sc, got, w)
		}
	}
}

func TestSysfsFakeTree(t *testing.T) {
	topo := readTree(t, fakeTree, allCPUs)
	if topo.Online.String() != "0-6" || topo.Possible.String() != "0-7" {
		t.Fatalf("online %q possible %q, want 0-6 and 0-7", topo.Online, topo.Possible)
	}
	expectPods(t, topo, map[Scope][]string{
		ScopeCPU:    {"0", "1", "2", "3", "4", "5", "6"},
		ScopeSMT:    {"0-1", "2-3", "4-5", "6"},
		ScopeCache:  {"0-3", "4-6"},
		ScopeNUMA:   {"0-3", "4-6"},
		ScopeSystem: {"0-6"},
	})
	nodes := topo.Nodes()
	if len(nodes) != 2 || nodes[0].ID != 0 || !nodes[0].CPUs.Equal(mustList(t, "0-3")) ||
		nodes[1].ID != 1 || !nodes[1].CPUs.Equal(mustList(t, "4-6")) {
		t.Errorf("Nodes() = %v", nodes)
	}
	if topo.NodeOf(5) != 1 || topo.NodeOf(7) != -1 {
		t.Errorf("NodeOf(5) = %d, NodeOf(7) = %d", topo.NodeOf(5), topo.NodeOf(7))
	}
	if topo.PodOf(ScopeSMT, 5) != 2 || topo.PodOf(ScopeCache, 7) != -1 {
		t.Errorf("PodOf(smt, 5) = %d, PodOf(cache, 7) = %d", topo.PodOf(ScopeSMT, 5), topo.PodOf(ScopeCache, 7))
	}
}

func TestSysfsAffinityNarrows(t *testing.T) {
	topo := readTree(t, fakeTree, func() (CPUSet, error) { return NewCPUSet(1, 2, 5, 7), nil })
	if topo.Online.String() != "1-2,5" || topo.Possible.String() != "0-7" {
		t.Fatalf("online %q possible %q", topo.Online, topo.Possible)
	}
	expectPods(t, topo, map[Scope][]string{
		ScopeSMT:    {"1", "2", "5"},
		ScopeCache:  {"1-2", "5"},
		ScopeNUMA:   {"1-2", "5"},
		ScopeSystem: {"1-2,5"},
	})

	boom := errors.New("boom")
	if _, err := (&SysfsSource{Root: fakeTree, Affinity: func() (CPUSet, error) { return CPUSet{}, boom }}).Read(); !errors.Is(err, boom) {
		t.Fatalf("affinity error not returned: %v", err)
	}
	if _, err := (&SysfsSource{Root: fakeTree, Affinity: func() (CPUSet, error) { return NewCPUSet(7), nil }}).Read(); !errors.Is(err, ErrNoCPUs) {
		t.Fatalf("affinity on an offline CPU only: err = %v, want ErrNoCPUs", err)
	}
}

func TestSysfsCgroup(t *testing.T) {
	root := copyTree(t)
	// The process's own cgroup has a cpuset file: it narrows Online.
	writeFile(t, root, "sys/fs/cgroup/gowq.slice/app.scope/cpuset.cpus.effective", "0-2\n")
	topo := readTree(t, root, allCPUs)
	if topo.Online.String() != "0-2" {
		t.Fatalf("online %q, want 0-2", topo.Online)
	}
	expectPods(t, topo, map[Scope][]string{ScopeSMT: {"0-1", "2"}, ScopeNUMA: {"0-2"}})

	// Without it the nearest ancestor's bounds it.
	os.Remove(filepath.Join(root, "sys/fs/cgroup/gowq.slice/app.scope/cpuset.cpus.effective"))
	writeFile(t, root, "sys/fs/cgroup/gowq.slice/cpuset.cpus.effective", "4-7\n")
	if topo := readTree(t, root, allCPUs); topo.Online.String() != "4-6" {
		t.Fatalf("online %q, want 4-6 from the parent cgroup", topo.Online)
	}

	// cgroup v1 (hybrid layout, like this project's CI machine).
	writeFile(t, root, "proc/self/cgroup", "3:cpuset:/job\n4:memory:/x\n0::/\n")
	writeFile(t, root, "sys/fs/cgroup/cpuset/job/cpuset.effective_cpus", "3,5\n")
	if topo := readTree(t, root, allCPUs); topo.Online.String() != "3,5" {
		t.Fatalf("online %q, want 3,5 from cgroup v1", topo.Online)
	}
	// A path outside our cgroup namespace is ignored.
	writeFile(t, root, "proc/self/cgroup", "0::/../../elsewhere\n")
	if topo := readTree(t, root, allCPUs); topo.Online.String() != "0-6" {
		t.Fatalf("online %q, want 0-6", topo.Online)
	}
	// A malformed cpuset file is an error, not a silent full set.
	writeFile(t, root, "proc/self/cgroup", "0::/\n")
	writeFile(t, root, "sys/fs/cgroup/cpuset.cpus.effective", "0-x\n")
	if _, err := (&SysfsSource{Root: root, Affinity: allCPUs}).Read(); !errors.Is(err, ErrSyntax) {
		t.Fatalf("malformed cpuset: err = %v, want ErrSyntax", err)
	}
	// An empty intersection is ErrNoCPUs.
	writeFile(t, root, "sys/fs/cgroup/cpuset.cpus.effective", "7\n")
	if _, err := (&SysfsSource{Root: root, Affinity: allCPUs}).Read(); !errors.Is(err, ErrNoCPUs) {
		t.Fatalf("err = %v, want ErrNoCPUs", err)
	}
}

func TestSysfsDegradation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove []string
		write  map[string]string
		online string
		want   map[Scope][]string
	}{
		{
			name:   "no cache: LLC per node",
			remove: []string{"sys/devices/system/cpu/cpu*/cache"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSMT: {"0-1", "2-3", "4-5", "6"}, ScopeCache: {"0-3", "4-6"}, ScopeNUMA: {"0-3", "4-6"}},
		},
		{
			name:   "no node dirs: node 0 holds all",
			remove: []string{"sys/devices/system/node"},
			online: "0-6",
			want:   map[Scope][]string{ScopeCache: {"0-3", "4-6"}, ScopeNUMA: {"0-6"}},
		},
		{
			name:   "no cache and no nodes: one cache group",
			remove: []string{"sys/devices/system/cpu/cpu*/cache", "sys/devices/system/node"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSMT: {"0-1", "2-3", "4-5", "6"}, ScopeCache: {"0-6"}, ScopeNUMA: {"0-6"}},
		},
		{
			name:   "cache on some CPUs only",
			remove: []string{"sys/devices/system/cpu/cpu[4-6]/cache"},
			online: "0-6",
			want:   map[Scope][]string{ScopeCache: {"0-3", "4-6"}},
		},
		{
			name:   "only instruction caches: LLC per node",
			remove: []string{"sys/devices/system/cpu/cpu*/cache/index[023]"},
			online: "0-6",
			want:   map[Scope][]string{ScopeCache: {"0-3", "4-6"}},
		},
		{
			name:   "shared_cpu_map instead of shared_cpu_list",
			remove: []string{"sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list"},
			write: map[string]string{
				"sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_map": "0f\n",
				"sys/devices/system/cpu/cpu1/cache/index3/shared_cpu_map": "0f\n",
				"sys/devices/system/cpu/cpu2/cache/index3/shared_cpu_map": "0f\n",
				"sys/devices/system/cpu/cpu3/cache/index3/shared_cpu_map": "0f\n",
				"sys/devices/system/cpu/cpu4/cache/index3/shared_cpu_map": "30\n", // 4-5 only
				"sys/devices/system/cpu/cpu5/cache/index3/shared_cpu_map": "30\n",
				"sys/devices/system/cpu/cpu6/cache/index3/shared_cpu_map": "40\n",
			},
			online: "0-6",
			want:   map[Scope][]string{ScopeCache: {"0-3", "4-5", "6"}},
		},
		{
			name:   "no topology dirs: each CPU its own core",
			remove: []string{"sys/devices/system/cpu/cpu*/topology"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSMT: {"0", "1", "2", "3", "4", "5", "6"}, ScopeCache: {"0-3", "4-6"}},
		},
		{
			name:   "no online file: cpuN/online flags",
			remove: []string{"sys/devices/system/cpu/online"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSMT: {"0-1", "2-3", "4-5", "6"}},
		},
		{
			name:   "no possible file",
			remove: []string{"sys/devices/system/cpu/possible"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSystem: {"0-6"}},
		},
		{
			name:   "no cgroup information",
			remove: []string{"proc", "sys/fs"},
			online: "0-6",
			want:   map[Scope][]string{ScopeSystem: {"0-6"}},
		},
		{
			name:   "no cpu sysfs, nodes present: unknown CPU 7 is in node 0",
			remove: []string{"sys/devices/system/cpu"},
			online: "0-7",
			want:   map[Scope][]string{ScopeSMT: {"0", "1", "2", "3", "4", "5", "6", "7"}, ScopeCache: {"0-3,7", "4-6"}},
		},
		{
			name:   "no system sysfs at all: the affinity, one node",
			remove: []string{"sys/devices/system"},
			online: "0-7",
			want:   map[Scope][]string{ScopeSMT: {"0", "1", "2", "3", "4", "5", "6", "7"}, ScopeCache: {"0-7"}, ScopeNUMA: {"0-7"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t)
			for _, r := range tc.remove {
				removeGlob(t, root, r)
			}
			for rel, c := range tc.write {
				writeFile(t, root, rel, c)
			}
			aff := func() (CPUSet, error) { return rangeSet(0, 7), nil }
			topo := readTree(t, root, aff)
			if topo.Online.String() != tc.online {
				t.Fatalf("online %q, want %q", topo.Online, tc.online)
			}
			if !topo.Online.IsSubset(topo.Possible) {
				t.Fatalf("online %q not within possible %q", topo.Online, topo.Possible)
			}
			expectPods(t, topo, tc.want)
		})
	}
}

func TestSysfsMalformed(t *testing.T) {
	for rel, content := range map[string]string{
		"sys/devices/system/cpu/online":                             "0-",
		"sys/devices/system/cpu/possible":                           "zz",
		"sys/devices/system/node/node1/cpulist":                     "4-6,",
		"sys/devices/system/cpu/cpu3/topology/thread_siblings_list": "2-",
		"sys/devices/system/cpu/cpu5/topology/thread_siblings_list": "x", // the plain-read path
		"sys/devices/system/cpu/cpu6/cache/index3/shared_cpu_list":  "6-4",
		"sys/devices/system/cpu/cpu6/cache/index3/level":            "three",
	} {
		t.Run(rel, func(t *testing.T) {
			root := copyTree(t)
			writeFile(t, root, rel, content)
			topo, err := (&SysfsSource{Root: root, Affinity: allCPUs}).Read()
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Read = %v, %v; want ErrSyntax", topo, err)
			}
		})
	}
}

// TestSysfsLayoutReread checks that the cached per-CPU layout is read again
// when the kernel's online mask changes (hotplug).
func TestSysfsLayoutReread(t *testing.T) {
	root := copyTree(t)
	src := &SysfsSource{Root: root, Affinity: allCPUs}
	first, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	// CPU 7 comes online, in node 1, sibling of 6, sharing 4-7's L3.
	writeFile(t, root, "sys/devices/system/cpu/online", "0-7\n")
	writeFile(t, root, "sys/devices/system/node/node1/cpulist", "4-7\n")
	for _, c := range []string{"6", "7"} {
		writeFile(t, root, "sys/devices/system/cpu/cpu"+c+"/topology/thread_siblings_list", "6-7\n")
		writeFile(t, root, "sys/devices/system/cpu/cpu"+c+"/cache/index3/level", "3\n")
		writeFile(t, root, "sys/devices/system/cpu/cpu"+c+"/cache/index3/type", "Unified\n")
		writeFile(t, root, "sys/devices/system/cpu/cpu"+c+"/cache/index3/shared_cpu_list", "4-7\n")
	}
	second, err := src.Read()
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, second)
	if first.Equal(second) {
		t.Fatal("hotplug of CPU 7 not seen")
	}
	expectPods(t, second, map[Scope][]string{
		ScopeSMT: {"0-1", "2-3", "4-5", "6-7"}, ScopeCache: {"0-3", "4-7"}, ScopeNUMA: {"0-3", "4-7"},
	})
}

// TestSysfsRealSystem reads this machine's sysfs. It makes no assumption
// about the hardware beyond consistency with the kernel's online mask and
// the process affinity.
func TestSysfsRealSystem(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skipf("no sysfs here: %v", err)
	}
	topo, err := (&SysfsSource{}).Read()
	if err != nil {
		t.Fatal(err)
	}
	checkPartition(t, topo)
	aff, err := ProcessAffinity()
	if err != nil {
		t.Fatal(err)
	}
	if !topo.Online.IsSubset(aff) || topo.Online.IsEmpty() {
		t.Fatalf("online %q not a non-empty subset of the affinity %q", topo.Online, aff)
	}
	if sys, ok, _ := readListFile("/sys/devices/system/cpu/online"); ok && !topo.Online.IsSubset(sys) {
		t.Fatalf("online %q not within the kernel's online %q", topo.Online, sys)
	}
	if !topo.Online.IsSubset(topo.Possible) {
		t.Fatalf("online %q not within possible %q", topo.Online, topo.Possible)
	}
	t.Logf("this machine: %v", topo)
}
