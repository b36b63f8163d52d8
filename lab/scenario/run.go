package scenario

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/stats"
	"github.com/gowq/wq/lab/threadattr"
)

// Run runs the selected scenarios one after the other and returns their
// results. It blocks for about Duration per scenario plus preparation
// (the first run writes the verity image, tens of ms to seconds).
//
// It returns an error wrapping ErrInvalidOption for bad options, before
// running anything. Otherwise it does not fail half-way: a scenario whose
// data cannot be prepared is returned as skipped, a row that cannot run
// here (no privilege for SCHED_FIFO or nice -20, wq.ErrPermission) is
// returned as skipped with the reason, and a missing antagonist is noted.
// When ctx ends, Run stops after the current slice and returns the
// results so far together with ctx.Err().
func Run(ctx context.Context, o Options) (*Results, error) {
	p, err := o.plan()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	res := &Results{
		Schema:  SchemaVersion,
		Started: time.Now().UTC(),
		Machine: DetectMachine(),
		Settings: Settings{
			Scenarios: p.scenarios, Configs: o.Configs, DurationNs: int64(p.duration), Quick: p.quick,
			Antagonist: p.antagonist, VeritySize: p.veritySize, ErofsBytes: p.erofsBytes, Interleaved: true,
			Kernel: p.kernel, ThroughputLoad: p.tputLoad,
		},
	}
	logPrivileges(res.Machine.Privileges, p, logf)

	// Prepare every scenario's data before any load starts.
	works := map[string]workload{}
	prepErr := map[string]error{}
	defer func() {
		for _, w := range works {
			w.close()
		}
	}()
	for _, name := range p.scenarios {
		progress(o, Progress{Scenario: name, Phase: PhasePrepare})
		w, err := prepare(name, p, res.Machine.Privileges)
		if err != nil {
			prepErr[name] = err
			logf("%s: cannot prepare: %v (scenario skipped)", name, err)
			continue
		}
		works[name] = w
	}

	lm := newLoads(p, res.Machine.Privileges.Nice20, logf)
	defer lm.Close()
	for _, name := range p.scenarios {
		if ctx.Err() != nil {
			break
		}
		def := defOf(name)
		var sr ScenarioResult
		if err := prepErr[name]; err != nil {
			sr = ScenarioResult{Name: name, Title: def.title, Seeds: def.seeds, Description: def.desc,
				Default: def.dflt, Skipped: true, SkipReason: "cannot prepare data: " + err.Error()}
		} else {
			lm.Ensure(p.loadOf(def), 0)
			sr = runScenario(ctx, o, p, def, works[name], lm, logf)
		}
		res.Scenarios = append(res.Scenarios, sr)
		progress(o, Progress{Scenario: name, Phase: PhaseDone, Result: &res.Scenarios[len(res.Scenarios)-1]})
	}
	res.Finished = time.Now().UTC()
	return res, ctx.Err()
}

func progress(o Options, p Progress) {
	if o.Progress != nil {
		o.Progress(p)
	}
}

func logPrivileges(pr Privileges, p *plan, logf func(string, ...any)) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "NO"
	}
	if pr.SchedFIFO && pr.Nice20 {
		return
	}
	logf("privileges: uid %d, CAP_SYS_NICE %s, SCHED_FIFO %s, nice -20 %s",
		pr.EUID, yes(pr.CapSysNice), yes(pr.SchedFIFO), yes(pr.Nice20))
	if !pr.SchedFIFO {
		var ids []string
		for _, c := range allConfigs {
			if c.Class == ClassRT && p.filter.has(c.ID) {
				ids = append(ids, c.ID)
			}
		}
		logf("  SCHED_FIFO: %s", pr.SchedFIFONote)
		if len(ids) > 0 {
			logf("  -> the RT rows (%s) will be skipped", strings.Join(ids, ", "))
		}
	}
	if !pr.Nice20 {
		logf("  nice -20: %s", pr.Nice20Note)
		logf("  -> the highpri rows will be skipped and the delayed scenario's hogs keep the inherited nice (the tables give what every thread ran at)")
	}
}

func prepare(name string, p *plan, pr Privileges) (workload, error) {
	switch name {
	case Verity:
		return newVerity(p)
	case Erofs:
		return newErofs(p)
	case Submit:
		return &submitWork{}, nil
	case Delayed:
		return newDelayed(hogCPU(), pr.Nice20), nil
	case Throughput:
		return newThroughput(p), nil
	}
	return nil, fmt.Errorf("%w: unknown scenario %q", ErrInvalidOption, name)
}

// warmup is how long each row runs before measuring, so that worker
// threads exist and code paths are warm.
const warmup = 30 * time.Millisecond

// runScenario measures every selected row of def under the current load.
//
// Interleaving (driver.Interleave): the rows are measured in rounds; each round gives every
// row one slice (50-500 ms) and the order rotates by one row per round.
// So a change in the machine's load during the run (a burner's phase, a
// background job) falls on every row alike, rather than on whichever
// rows happened to run at that moment.
func runScenario(ctx context.Context, o Options, p *plan, def *scenarioDef, w workload, lm *driver.Loads,
	logf func(string, ...any)) ScenarioResult {
	sr := ScenarioResult{Name: def.name, Title: def.title, Seeds: def.seeds, Description: def.desc, Default: def.dflt}
	sr.Notes = append(sr.Notes, def.notes...)
	var rows []*rowRun
	for i, d := range def.rows {
		if !p.filter.has(d.ID) {
			continue
		}
		r := &rowRun{def: d, rng: rand.New(rand.NewPCG(uint64(i)+1, 0x9e3779b97f4a7c15)), rec: newRecord()}
		run, err := newRunner(def.name, d, baselineWorkers())
		var skip *errSkip
		switch {
		case errors.As(err, &skip):
			r.skip = skip.reason
		case err != nil:
			r.skip = "cannot create: " + err.Error()
		default:
			r.run = run
			w.setup(r)
		}
		if r.skip != "" {
			logf("%s: %s skipped: %s", def.name, d.ID, r.skip)
		}
		rows = append(rows, r)
	}
	defer func() {
		for _, r := range rows {
			if r.run != nil {
				r.run.close()
			}
		}
	}()
	var live []*rowRun
	for _, r := range rows {
		if r.run != nil {
			live = append(live, r)
		}
	}
	slice, rounds := sliceLen(p.duration, len(live))
	if def.rounds != nil {
		// Count-based slices: the workload knows its share per round.
		slice, rounds = 0, def.rounds(p)
	}
	sr.SliceNs, sr.Rounds, sr.DurationNs = int64(slice), rounds, int64(slice)*int64(rounds)*int64(len(live))
	total := rounds * len(live)
	progress(o, Progress{Scenario: def.name, Phase: PhaseMeasure, Total: total})

	// What each row runs at is read back from its threads before and
	// after the measurement, outside the measured slices.
	seen := map[*rowRun][]threadattr.Attr{}
	for _, r := range live {
		w.slice(ctx, r, warmup, newRecord())
		seen[r] = readBack(r, nil)
	}
	probe := lm.Probe()
	var kern *kernelRec
	if p.kernel {
		kern = startKernel(ctx, p, def.name, logf)
	}
	done := 0
	t0 := time.Now()
	// Each slice goes to a record of its own first, so that the verdict
	// gets the spread of its metric across rounds (applyMargin).
	perRound := roundFigures{}
	driver.Interleave(ctx, len(live), rounds, func(i, _ int) bool {
		rr := newRecord()
		w.slice(ctx, live[i], slice, rr)
		live[i].rec.merge(rr)
		perRound.add(def, live[i], rr)
		done++
		progress(o, Progress{Scenario: def.name, Phase: PhaseMeasure, Done: done, Total: total})
		return true
	})
	if def.rounds != nil {
		sr.DurationNs = int64(time.Since(t0))
	}
	for _, r := range live {
		seen[r] = readBack(r, seen[r])
	}
	var kernRows []Row
	var kernNotes []string
	if p.kernel {
		kernRows, kernNotes = kern.finish(def.name, logf)
	}
	fillLoad(lm.Read(probe), &sr.Load)
	w.describe(&sr.Load)
	if def.name == Delayed {
		nc := lm.HogNice()
		sr.Load.HogNice = &nc
	}

	for _, r := range rows {
		sr.Rows = append(sr.Rows, rowResult(def, r, ctx.Err() != nil))
		last := &sr.Rows[len(sr.Rows)-1]
		last.RanAt = ranAt(seen[r])
		if last.Throughput != nil {
			for _, rr := range perRound[r.def.ID] {
				if rr.Throughput != nil {
					last.Throughput.RoundsPerSec = append(last.Throughput.RoundsPerSec, rr.Throughput.ItemsPerSec)
				}
			}
		}
		if def.name == Verity && r.rec.clat.Len() > 0 {
			if sr.clat == nil {
				sr.clat = map[string]*stats.Samples{}
			}
			sr.clat[r.def.ID] = r.rec.clat
		}
	}
	sr.Rows = append(sr.Rows, kernRows...)
	sr.Notes = append(sr.Notes, kernNotes...)
	computeChanges(&sr, def.changes)
	if def.finish != nil {
		def.finish(&sr)
	}
	if def.verdictFn != nil {
		sr.Verdict = def.verdictFn(&sr)
		if def.name == Throughput {
			applyThroughputMargin(&sr, perRound)
		}
	} else {
		sr.Verdict = computeVerdict(&sr, def.verdict)
		applyMargin(&sr, def.verdict, perRound)
	}
	if p.quick {
		markIndicative(&sr.Verdict)
	}
	if ctx.Err() != nil {
		sr.Notes = append(sr.Notes, "Interrupted: the rows were measured for less than the planned time.")
	}
	return sr
}

func rowResult(def *scenarioDef, r *rowRun, interrupted bool) Row {
	out := Row{ID: r.def.ID, Label: r.def.Label, Note: r.def.Note, Kind: r.def.Kind, Class: r.def.Class, Batch: r.def.Batch}
	if r.def.Kind == KindGowq {
		out.Flags = r.def.Flags.String()
	}
	if r.run == nil {
		out.Skipped, out.SkipReason = true, r.skip
		return out
	}
	rec := r.rec
	out.Items = rec.lat.Len()
	out.Missed = rec.missed
	out.MeasuredNs = int64(rec.active)
	if out.Items == 0 {
		out.Skipped = true
		out.SkipReason = "no item completed"
		if interrupted {
			out.SkipReason = "interrupted before it was measured"
		}
		if rec.err != nil {
			out.SkipReason += ": " + rec.err.Error()
		}
		return out
	}
	out.QueueToStart = latencyOf(rec.lat)
	out.CDF = cdfOf(rec.lat)
	switch def.name {
	case Verity:
		c := latencyOf(rec.clat)
		out.Clat = &c
		out.ClatCDF = cdfOf(rec.clat)
		if rec.active > 0 {
			out.BandwidthMiBs = float64(rec.bytes) / (1 << 20) / rec.active.Seconds()
		}
	case Delayed:
		pct := 100 * float64(rec.onCPU) / float64(out.Items)
		out.OnQueueCPUPct = &pct
	case Throughput:
		out.Throughput = throughputOf(rec)
	}
	if rec.errs > 0 {
		out.Errors, out.Error = rec.errs, rec.err.Error()
	}
	return out
}
