package scenario

import (
	"github.com/gowq/wq/lab/driver"
)

// Load kinds a scenario asks for; the loads themselves are the lab
// driver's (driver.Loads), shared with `wqlab wake`.
const (
	loadBurners = driver.LoadBurners // the cpuio burners (or fio, or none, per Options.Antagonist)
	loadHog     = driver.LoadHog     // seed 004's pinned hog
	loadNone    = driver.LoadNone    // no antagonist (throughput)
)

// loadOf returns the load scenario def runs under: its own, except that
// the throughput table runs under the burners with Options.ThroughputLoad.
func (p *plan) loadOf(def *scenarioDef) driver.LoadKind {
	if def.name == Throughput && p.tputLoad {
		return loadBurners
	}
	return def.load
}

// newLoads returns the load manager of a run.
func newLoads(p *plan, nice20 bool, logf func(string, ...any)) *driver.Loads {
	return &driver.Loads{
		Off:      p.antagonist == AntagonistNone,
		Fio:      p.antagonist == AntagonistFio,
		HogCPU:   hogCPU(),
		NoNice20: !nice20,
		Logf:     logf,
	}
}

// fillLoad copies what the load achieved into info.
func fillLoad(f driver.Facts, info *LoadInfo) {
	info.Antagonist = f.Antagonist
	info.Note = driver.JoinNote(info.Note, f.Note)
	info.WallNs = f.WallNs
	info.ProcCPUs = f.ProcCPUs
	info.AskedCPUs, info.OnCPUs = f.AskedCPUs, f.OnCPUs
	info.Error = f.Error
	info.AllPct = f.AllPct
	for _, c := range f.PerCPU {
		info.PerCPU = append(info.PerCPU, CPUBusy{CPU: c.CPU, BusyPct: c.BusyPct})
	}
}
