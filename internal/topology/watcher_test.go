package topology

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// change records one onChange call.
type change struct{ old, new *Topology }

// recorder collects onChange calls and checks that they never overlap.
type recorder struct {
	mu       sync.Mutex
	calls    []change
	inFlight atomic.Int32
	overlap  atomic.Bool
	ch       chan change // optional; receives every call
}

func (r *recorder) onChange(old, new *Topology) {
	if r.inFlight.Add(1) != 1 {
		r.overlap.Store(true)
	}
	defer r.inFlight.Add(-1)
	r.mu.Lock()
	r.calls = append(r.calls, change{old, new})
	r.mu.Unlock()
	if r.ch != nil {
		r.ch <- change{old, new}
	}
}

func (r *recorder) n() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// errSource fails while err is set, else delegates to StaticSource.
type errSource struct {
	StaticSource
	mu  sync.Mutex
	err error
}

func (s *errSource) Read() (*Topology, error) {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.StaticSource.Read()
}

func TestWatcherRescan(t *testing.T) {
	t1 := NewStatic(mustList(t, "0-3"), nil, nil, nil)
	src := &errSource{StaticSource: StaticSource{T: t1}}
	rec := &recorder{}
	w := NewWatcher(src, 0, rec.onChange)

	if w.Current() != nil || w.Err() != nil {
		t.Fatal("a new Watcher already has a topology or error")
	}
	got, changed, err := w.Rescan()
	if err != nil || !changed || got != t1 || w.Current() != t1 {
		t.Fatalf("first Rescan = %v, %v, %v", got, changed, err)
	}
	if rec.n() != 1 || rec.calls[0].old != nil || rec.calls[0].new != t1 {
		t.Fatalf("first onChange calls: %v", rec.calls)
	}

	// An equal topology (a new pointer) is no change; Current keeps the old.
	src.Set(NewStatic(mustList(t, "0-3"), nil, nil, nil))
	if got, changed, err := w.Rescan(); err != nil || changed || got != t1 || w.Current() != t1 || rec.n() != 1 {
		t.Fatalf("Rescan of an equal topology = %v, %v, %v (calls %d)", got, changed, err, rec.n())
	}

	// CPU 3 goes away.
	t2 := NewStatic(mustList(t, "0-2"), nil, nil, nil)
	src.Set(t2)
	if got, changed, err := w.Rescan(); err != nil || !changed || got != t2 || w.Current() != t2 {
		t.Fatalf("Rescan after hotplug = %v, %v, %v", got, changed, err)
	}
	if rec.n() != 2 || rec.calls[1].old != t1 || rec.calls[1].new != t2 {
		t.Fatalf("onChange calls: %v", rec.calls)
	}

	// A failing source keeps the current topology and reports the error.
	boom := errors.New("sysfs unreadable")
	src.mu.Lock()
	src.err = boom
	src.mu.Unlock()
	if got, changed, err := w.Rescan(); !errors.Is(err, boom) || changed || got != t2 || w.Current() != t2 {
		t.Fatalf("Rescan with error = %v, %v, %v", got, changed, err)
	}
	if !errors.Is(w.Err(), boom) || rec.n() != 2 {
		t.Fatalf("Err() = %v, calls %d", w.Err(), rec.n())
	}
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	if _, _, err := w.Rescan(); err != nil || w.Err() != nil {
		t.Fatalf("Err() not cleared after success: %v / %v", err, w.Err())
	}

	// A nil topology without an error is an error too.
	src.Set(nil)
	if _, _, err := w.Rescan(); !errors.Is(err, ErrNilTopology) || w.Current() != t2 {
		t.Fatalf("nil topology: %v", err)
	}
}

func TestWatcherNilOnChange(t *testing.T) {
	src := &StaticSource{T: NewStatic(mustList(t, "0"), nil, nil, nil)}
	w := NewWatcher(src, 0, nil)
	if _, changed, err := w.Rescan(); err != nil || !changed {
		t.Fatalf("Rescan = %v, %v", changed, err)
	}
}

func TestWatcherBackground(t *testing.T) {
	t1 := NewStatic(mustList(t, "0-3"), nil, nil, nil)
	src := &StaticSource{T: t1}
	rec := &recorder{ch: make(chan change, 1)}
	w := NewWatcher(src, time.Millisecond, rec.onChange)
	if _, _, err := w.Rescan(); err != nil {
		t.Fatal(err)
	}
	<-rec.ch
	w.Start()
	w.Start() // a second Start is a no-op

	// Concurrent Rescan callers and the loop never overlap in onChange.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				_, _, _ = w.Rescan()
			}
		})
	}

	t2 := NewStatic(mustList(t, "0-1"), nil, nil, nil)
	src.Set(t2)
	// Liveness, not timing: the change must arrive eventually.
	select {
	case c := <-rec.ch:
		if c.old != t1 || c.new != t2 {
			t.Errorf("onChange(%v, %v), want (t1, t2)", c.old, c.new)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the background scan never reported the change")
	}
	wg.Wait()
	w.Stop()
	w.Stop()  // idempotent
	w.Start() // no restart after Stop; goleak would catch the goroutine
	if rec.overlap.Load() {
		t.Fatal("onChange calls overlapped")
	}
	if rec.n() != 2 || w.Current() != t2 {
		t.Fatalf("calls %d, current %v", rec.n(), w.Current())
	}
	// Rescan still works after Stop.
	t3 := NewStatic(mustList(t, "1"), nil, nil, nil)
	src.Set(t3)
	if got, changed, err := w.Rescan(); err != nil || !changed || got != t3 {
		t.Fatalf("Rescan after Stop = %v, %v, %v", got, changed, err)
	}
	<-rec.ch
}

func TestWatcherStopWithoutStart(t *testing.T) {
	w := NewWatcher(&StaticSource{}, 0, nil)
	w.Stop()
	w.Start() // must not start a goroutine after Stop
}

// TestWatcherSysfsTree drives a Watcher over a fake sysfs tree that changes
// as it would on the real system: a CPU goes offline, the cgroup cpuset is
// narrowed, the affinity is narrowed.
func TestWatcherSysfsTree(t *testing.T) {
	root := copyTree(t)
	var aff atomic.Pointer[CPUSet]
	all := rangeSet(0, 7)
	aff.Store(&all)
	src := &SysfsSource{Root: root, Affinity: func() (CPUSet, error) { return *aff.Load(), nil }}
	rec := &recorder{}
	w := NewWatcher(src, 0, rec.onChange)
	if _, _, err := w.Rescan(); err != nil {
		t.Fatal(err)
	}
	step := func(what, wantOnline string) {
		t.Helper()
		got, changed, err := w.Rescan()
		if err != nil || !changed || got.Online.String() != wantOnline {
			t.Fatalf("%s: Rescan = %v, %v, %v; want online %s", what, got, changed, err, wantOnline)
		}
		checkPartition(t, got)
		if _, changed, _ := w.Rescan(); changed {
			t.Fatalf("%s: a second Rescan reports a change", what)
		}
	}
	writeFile(t, root, "sys/devices/system/cpu/online", "0-5\n")
	writeFile(t, root, "sys/devices/system/node/node1/cpulist", "4-5\n")
	step("CPU 6 offline", "0-5")
	writeFile(t, root, "sys/fs/cgroup/gowq.slice/app.scope/cpuset.cpus.effective", "1-4\n")
	step("cgroup narrowed", "1-4")
	narrow := NewCPUSet(2, 3)
	aff.Store(&narrow)
	step("affinity narrowed", "2-3")
	if rec.n() != 4 {
		t.Fatalf("%d onChange calls, want 4", rec.n())
	}
}
