package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/lab/antagonist"
	"github.com/gowq/wq/lab/threadattr"
)

// LoadKind names a CPU load a measurement asks for.
type LoadKind string

// The loads.
const (
	// LoadNone is an idle machine.
	LoadNone LoadKind = "none"
	// LoadBurners is 8 burner children equivalent to fio ioengine=cpuio
	// cpuload=90 numjobs=8 cpumode=qsort (seed 000), or the real fio when
	// Loads.Fio is set and fio is installed.
	LoadBurners LoadKind = "burners"
	// LoadHog is seed 004's antagonist: HogProcs hogs pinned to
	// Loads.HogCPU at nice -20 (the inherited nice when not permitted, with a note).
	LoadHog LoadKind = "hog"
	// LoadHogs is one hog pinned to each online CPU at nice -20 (inherited nice
	// when not permitted, with a note): `wqlab wake --load hogs`.
	LoadHogs LoadKind = "hogs"
)

// HogProcs is the number of hog processes of LoadHog, as seed 004's
// `stress --cpu 2`.
const HogProcs = 2

// fioJob is the seed's burner job (testdata/seed-burn-8x90-qsort.fio)
// with a runtime long enough for any run; the lab stops fio itself.
const fioJob = `[global]
time_based
runtime=86400
[burn_8x90%_qsort]
ioengine=cpuio
cpuload=90
numjobs=8
cpumode=qsort
`

// Loads keeps the current antagonist running across measurements that
// want the same load (the burners start once for the scenarios verity,
// erofs and submit) and measures what it achieved. Set the fields before
// the first Ensure; the zero value runs burners and hogs at nice -20 when
// permitted. Not safe for concurrent use.
type Loads struct {
	// Off runs every measurement without load (wqlab --antagonist none);
	// the note says the seeds' effects need load.
	Off bool
	// Fio runs the real fio for LoadBurners, falling back to the
	// equivalent burners when fio cannot start.
	Fio bool
	// HogCPU is the CPU LoadHog pins its hogs to.
	HogCPU int
	// NoNice20 runs the hogs at the inherited nice (with a note) without trying
	// nice -20: the caller knows it is not permitted.
	NoNice20 bool
	// Logf receives one-line notes about fallbacks; nil discards them.
	Logf func(format string, args ...any)

	kind   LoadKind
	groups []*antagonist.Group
	name   string
	note   string
	nice   int
	tmpDir string
}

func (m *Loads) logf(format string, args ...any) {
	if m.Logf != nil {
		m.Logf(format, args...)
	}
}

// Name describes the running load, e.g. "8 burners at 90% (qsort)" or
// "none".
func (m *Loads) Name() string { return m.name }

// Note is a fallback the load took ("hog at nice 0: ..."), or "".
func (m *Loads) Note() string { return m.note }

// HogNice is the nice value the hogs of LoadHog and LoadHogs run at, as
// read back from their threads when the load started (the nice asked for
// when it could not be read back).
func (m *Loads) HogNice() int { return m.nice }

// readBack returns the scheduling classes of the running load's threads
// (/proc/<pid>/task/*/stat), e.g. "nice 19", and sets m.nice to the read
// nice when every thread has the same one. When nothing can be read it
// returns the nice asked for, marked as not read back.
func (m *Loads) readBack() string {
	var all []threadattr.Attr
	for _, g := range m.groups {
		for _, pid := range g.Pids() {
			as, err := threadattr.Process(pid)
			if err != nil {
				continue
			}
			for _, a := range as {
				if !slices.Contains(all, a) {
					all = append(all, a)
				}
			}
		}
	}
	if len(all) == 0 {
		return fmt.Sprintf("nice %d (asked for; not read back)", m.nice)
	}
	if len(all) == 1 && !all[0].RT() {
		m.nice = all[0].Nice
	}
	return threadattr.Join(all)
}

// Ensure makes the load of kind run, stopping a different one first. It
// never fails: when no load can be started it says so in Note and the
// measurement runs unloaded. Starting a load takes a few ms (children
// are spawned) and lets it settle for settle when it was not already
// running.
func (m *Loads) Ensure(kind LoadKind, settle time.Duration) {
	if m.kind == kind && m.name != "" {
		return
	}
	m.Stop()
	m.kind = kind
	if kind == LoadNone || kind == "" {
		m.name = "none"
		return
	}
	if m.Off {
		m.name, m.note = "none", "no antagonist (--antagonist none): the seeds' effects need CPU load"
		return
	}
	switch kind {
	case LoadBurners:
		if m.Fio {
			g, err := m.startFio()
			if err == nil {
				m.groups, m.name = []*antagonist.Group{g}, "fio "+g.Name()
				break
			}
			m.note = fmt.Sprintf("fio not used (%v); using the equivalent cpuio burners", err)
			m.logf("load: %s", m.note)
		}
		g, err := antagonist.Burners(antagonist.BurnerSpec{})
		if err != nil {
			m.name = "none"
			m.note = JoinNote(m.note, fmt.Sprintf("burners failed to start (%v): measured without load", err))
			m.logf("load: %s", m.note)
			return
		}
		m.groups = []*antagonist.Group{g}
		m.name = g.Name() + ", " + m.readBack()
	case LoadHog, LoadHogs:
		cpus := []int{m.HogCPU}
		procs := HogProcs
		if kind == LoadHogs {
			cpus, procs = wq.OnlineCPUs(), 1
		}
		if err := m.startHogs(cpus, procs); err != nil {
			m.name = "none"
			m.note = JoinNote(m.note, fmt.Sprintf("hog failed to start (%v): measured without load", err))
			m.logf("load: %s", m.note)
			return
		}
		// The name gives the class read back from the hogs' threads, not
		// the one asked for: a hog asked for nice 0 keeps the inherited
		// nice of a niced lab.
		class := m.readBack()
		if kind == LoadHog {
			m.name = fmt.Sprintf("%d hogs pinned to cpu%d at %s", procs, m.HogCPU, class)
		} else {
			m.name = fmt.Sprintf("one hog pinned to each of %d CPUs at %s", len(cpus), class)
		}
		if m.note != "" {
			m.logf("load: %s", m.note)
		}
	default:
		m.name, m.note = "none", fmt.Sprintf("unknown load %q: measured without load", kind)
		return
	}
	if settle > 0 {
		time.Sleep(settle)
	}
}

// startHogs starts procs hogs pinned to each of cpus at nice -20, or at
// nice 0 with a note when nice -20 is not permitted (NoNice20, or the
// hog's own refusal).
func (m *Loads) startHogs(cpus []int, procs int) error {
	m.nice = -20
	if m.NoNice20 {
		m.nice = 0
		m.note = "hog not at nice -20 (not permitted): it keeps the inherited nice"
	}
	for _, c := range cpus {
		g, err := antagonist.Hog(antagonist.HogSpec{CPU: c, Procs: procs, Nice: m.nice})
		if errors.Is(err, antagonist.ErrPermission) && m.nice != 0 {
			for _, g := range m.groups {
				g.Stop()
			}
			m.groups = nil
			m.NoNice20 = true
			m.nice = 0
			err2 := m.startHogs(cpus, procs)
			m.note = fmt.Sprintf("hog not at nice -20 (%v): it keeps the inherited nice", err)
			return err2
		}
		if err != nil {
			return err
		}
		m.groups = append(m.groups, g)
	}
	return nil
}

func (m *Loads) startFio() (*antagonist.Group, error) {
	if m.tmpDir == "" {
		d, err := os.MkdirTemp("", "wqlab-fio-")
		if err != nil {
			return nil, err
		}
		m.tmpDir = d
	}
	job := filepath.Join(m.tmpDir, "burn-8x90-qsort.fio")
	if err := os.WriteFile(job, []byte(fioJob), 0o644); err != nil {
		return nil, err
	}
	return antagonist.Fio(job, 0)
}

// Stop ends the current load, if any, and forgets its note.
func (m *Loads) Stop() {
	for _, g := range m.groups {
		if err := g.Stop(); err != nil {
			m.logf("load: stopping %s: %v", m.name, err)
		}
	}
	m.groups, m.kind, m.name, m.note = nil, "", "", ""
}

// Close stops the load and removes temporary files.
func (m *Loads) Close() {
	m.Stop()
	if m.tmpDir != "" {
		os.RemoveAll(m.tmpDir)
		m.tmpDir = ""
	}
}

// CPUBusy is the utilisation of one CPU in percent.
type CPUBusy struct {
	CPU     int
	BusyPct float64
}

// Facts is what a load achieved over one measurement (Probe to Read).
type Facts struct {
	Antagonist string  // Name()
	Note       string  // Note(), and "the antagonist exited during the measurement"
	ProcCPUs   float64 // CPUs the antagonist processes kept busy (CPU time / wall)
	// AskedCPUs is the CPU time the antagonist asked for, in CPUs (8
	// burners at 90%: 7.2), on OnCPUs CPUs (antagonist.Group.Demand);
	// 0 when unknown (fio).
	AskedCPUs float64
	OnCPUs    int
	PerCPU    []CPUBusy // utilisation of each CPU (all processes), by CPU number
	AllPct    float64   // utilisation of all CPUs together, %
	WallNs    int64     // interval measured
	Error     string    // why the CPUs' utilisation could not be measured
}

// LoadProbe measures the load over one measurement; see Loads.Probe.
type LoadProbe struct {
	meter *antagonist.LoadMeter
	err   error
	u0    []antagonist.Usage
	t0    time.Time
}

// Probe starts measuring the load (/proc/stat and the antagonists' CPU
// time); Read ends it.
func (m *Loads) Probe() *LoadProbe {
	p := &LoadProbe{t0: time.Now()}
	p.meter, p.err = antagonist.StartLoadMeter()
	for _, g := range m.groups {
		p.u0 = append(p.u0, g.Usage())
	}
	return p
}

// Read returns the load's facts since p was taken. It does not fail: an
// unreadable /proc/stat is reported in Facts.Error.
func (m *Loads) Read(p *LoadProbe) Facts {
	f := Facts{Antagonist: m.name, Note: m.note, WallNs: int64(time.Since(p.t0))}
	for i, g := range m.groups {
		if i >= len(p.u0) {
			break
		}
		a, on := g.Demand()
		f.AskedCPUs += a
		f.OnCPUs += on
		u1 := g.Usage()
		if wall := u1.Wall - p.u0[i].Wall; wall > 0 {
			f.ProcCPUs += float64(u1.CPU-p.u0[i].CPU) / float64(wall)
		}
		select {
		case <-g.Done():
			f.Note = JoinNote(f.Note, "the antagonist exited during the measurement")
		default:
		}
	}
	if p.err != nil {
		f.Error = p.err.Error()
		return f
	}
	l, err := p.meter.Read()
	if err != nil {
		f.Error = err.Error()
		return f
	}
	f.AllPct = l.AllPct
	for _, c := range l.PerCPU {
		f.PerCPU = append(f.PerCPU, CPUBusy{CPU: c.CPU, BusyPct: c.BusyPct})
	}
	slices.SortFunc(f.PerCPU, func(a, b CPUBusy) int { return a.CPU - b.CPU })
	return f
}

// JoinNote joins two notes with "; ", dropping empty and repeated ones.
func JoinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	return a + "; " + b
}
