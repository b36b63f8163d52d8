package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gowq/wq/lab/antagonist"
)

// fioJob is the seed's burner job (testdata/seed-burn-8x90-qsort.fio)
// with a runtime long enough for any run; wqlab stops fio itself.
const fioJob = `[global]
time_based
runtime=86400
[burn_8x90%_qsort]
ioengine=cpuio
cpuload=90
numjobs=8
cpumode=qsort
`

// Load kinds a scenario asks for.
const (
	loadBurners = "burners" // the cpuio burners (or fio, or none, per Options.Antagonist)
	loadHog     = "hog"     // seed 004's pinned hog
)

// hogProcs is the number of hog processes, as seed 004's `stress --cpu 2`.
const hogProcs = 2

// loadMgr keeps the current antagonist group running across scenarios
// that want the same load, so that the burners start once for verity,
// erofs and submit.
type loadMgr struct {
	antagonist string // plan.antagonist
	nice20     bool
	hogCPU     int
	logf       func(format string, args ...any)

	kind   string
	g      *antagonist.Group
	name   string
	note   string
	hogNc  int
	tmpDir string
}

// ensure makes the load of kind run and returns a note about any
// fallback taken. It never fails: when no load can be started it says so
// in the note and the scenario runs unloaded.
func (m *loadMgr) ensure(kind string) {
	if m.kind == kind {
		return
	}
	m.stop()
	m.kind = kind
	if m.antagonist == AntagonistNone {
		m.name, m.note = "none", "no antagonist (--antagonist none): the seeds' effects need CPU load"
		return
	}
	switch kind {
	case loadBurners:
		if m.antagonist == AntagonistFio {
			g, err := m.startFio()
			if err == nil {
				m.g, m.name = g, "fio "+g.Name()
				return
			}
			m.note = fmt.Sprintf("fio not used (%v); using the equivalent cpuio burners", err)
			m.logf("load: %s", m.note)
		}
		g, err := antagonist.Burners(antagonist.BurnerSpec{})
		if err != nil {
			m.name = "none"
			m.note = joinNote(m.note, fmt.Sprintf("burners failed to start (%v): measured without load", err))
			m.logf("load: %s", m.note)
			return
		}
		m.g, m.name = g, g.Name()
	case loadHog:
		m.hogNc = -20
		if !m.nice20 {
			m.hogNc = 0
			m.note = "hog at nice 0: nice -20 not permitted"
		}
		g, err := antagonist.Hog(antagonist.HogSpec{CPU: m.hogCPU, Procs: hogProcs, Nice: m.hogNc})
		if errors.Is(err, antagonist.ErrPermission) && m.hogNc != 0 {
			m.hogNc = 0
			m.note = fmt.Sprintf("hog at nice 0: %v", err)
			g, err = antagonist.Hog(antagonist.HogSpec{CPU: m.hogCPU, Procs: hogProcs})
		}
		if err != nil {
			m.name = "none"
			m.note = joinNote(m.note, fmt.Sprintf("hog failed to start (%v): measured without load", err))
			m.logf("load: %s", m.note)
			return
		}
		m.g = g
		m.name = fmt.Sprintf("%d hogs pinned to cpu%d at nice %d", hogProcs, m.hogCPU, m.hogNc)
		if m.note != "" {
			m.logf("load: %s", m.note)
		}
	}
}

func (m *loadMgr) startFio() (*antagonist.Group, error) {
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

// stop ends the current load, if any.
func (m *loadMgr) stop() {
	if m.g != nil {
		if err := m.g.Stop(); err != nil {
			m.logf("load: stopping %s: %v", m.name, err)
		}
	}
	m.g, m.kind, m.name, m.note = nil, "", "", ""
}

// close stops the load and removes temporary files.
func (m *loadMgr) close() {
	m.stop()
	if m.tmpDir != "" {
		os.RemoveAll(m.tmpDir)
		m.tmpDir = ""
	}
}

// loadProbe measures the load over one scenario's measurement.
type loadProbe struct {
	meter *antagonist.LoadMeter
	err   error
	u0    antagonist.Usage
	t0    time.Time
}

func (m *loadMgr) probe() *loadProbe {
	p := &loadProbe{t0: time.Now()}
	p.meter, p.err = antagonist.StartLoadMeter()
	if m.g != nil {
		p.u0 = m.g.Usage()
	}
	return p
}

// read fills the load part of info.
func (m *loadMgr) read(p *loadProbe, info *LoadInfo) {
	info.Antagonist = m.name
	info.Note = joinNote(info.Note, m.note)
	info.WallNs = int64(time.Since(p.t0))
	if m.g != nil {
		u1 := m.g.Usage()
		if wall := u1.Wall - p.u0.Wall; wall > 0 {
			info.ProcCPUs = float64(u1.CPU-p.u0.CPU) / float64(wall)
		}
		select {
		case <-m.g.Done():
			info.Note = joinNote(info.Note, "the antagonist exited during the measurement")
		default:
		}
	}
	if p.err != nil {
		info.Error = p.err.Error()
		return
	}
	l, err := p.meter.Read()
	if err != nil {
		info.Error = err.Error()
		return
	}
	info.AllPct = l.AllPct
	for _, c := range l.PerCPU {
		info.PerCPU = append(info.PerCPU, CPUBusy{CPU: c.CPU, BusyPct: c.BusyPct})
	}
	slices.SortFunc(info.PerCPU, func(a, b CPUBusy) int { return a.CPU - b.CPU })
}

func joinNote(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	return a + "; " + b
}
