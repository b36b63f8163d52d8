package scenario

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gowq/wq/lab/ktrace"
	"github.com/gowq/wq/lab/stats"
	"github.com/gowq/wq/wqtrace/analyze"
)

// Kernel rows (Options.Kernel): which recorded workqueues become rows.
const (
	// kernelMaxRows is the most kernel rows one table gets.
	kernelMaxRows = 3
	// kernelMinItems is the fewest items a workqueue needs for a row;
	// fewer make no distribution worth a line.
	kernelMinItems = 10
	// kernelPreferred gets a row whenever it qualifies, before the
	// others: the block layer's HIGHPRI queue that runs I/O completion
	// work, which the seeds' fsync captures measure.
	kernelPreferred = "kblockd"
	// kernelStartWait bounds the wait for another gowq recording of
	// tracefs to end.
	kernelStartWait = 5 * time.Second
)

// kernelRec is the kernel recording of one scenario's measuring rounds.
type kernelRec struct {
	sess *ktrace.Session
	load *ktrace.FsyncLoad
	note string // why nothing was recorded; sess is nil then
}

// startKernel starts recording the kernel's workqueue events and the
// fsync helper that gives the kernel I/O work to queue. It never fails:
// when tracefs cannot be used it returns a kernelRec whose note says why.
func startKernel(ctx context.Context, p *plan, name string, logf func(string, ...any)) *kernelRec {
	sctx, cancel := context.WithTimeout(ctx, kernelStartWait)
	defer cancel()
	sess, err := ktrace.Start(sctx, ktrace.Config{Root: p.kernelFS})
	if err != nil {
		k := &kernelRec{note: "kernel kworkers not recorded: " + err.Error()}
		logf("%s: %s", name, k.note)
		return k
	}
	load, err := ktrace.StartFsyncLoad("", ktrace.DefaultFsyncPeriod)
	if err != nil {
		// Record anyway: the kernel may have work of its own.
		logf("%s: kernel kworkers: no fsync helper: %v", name, err)
	}
	return &kernelRec{sess: sess, load: load}
}

// finish stops the recording and returns the kernel rows and the notes
// for the table. It never fails: problems become notes.
func (k *kernelRec) finish(name string, logf func(string, ...any)) ([]Row, []string) {
	if k.sess == nil {
		return nil, []string{k.note}
	}
	var fsyncs int64 = -1
	if k.load != nil {
		n, err := k.load.Stop()
		fsyncs = n
		if err != nil {
			logf("%s: kernel kworkers: fsync helper: %v", name, err)
		}
	}
	rec, err := k.sess.Stop()
	var notes []string
	if err != nil {
		logf("%s: kernel kworkers: %v", name, err)
		notes = append(notes, "kernel kworkers: "+err.Error())
	}
	for _, n := range rec.Notes {
		logf("%s: kernel kworkers: note: %s", name, n)
	}
	rows := kernelRows(analyze.Analyze(rec.Events), rec.Duration)
	helper := "no fsync helper"
	if fsyncs >= 0 {
		helper = fmt.Sprintf("a helper wrote and fsynced a file every %v (%d times)", ktrace.DefaultFsyncPeriod, fsyncs)
	}
	if len(rows) == 0 {
		notes = append(notes, fmt.Sprintf("kernel kworkers: no workqueue had %d items in the recording (%d events; %s).",
			kernelMinItems, rec.Stats.Events, helper))
		return nil, notes
	}
	var wqs []string
	for _, r := range rows {
		wqs = append(wqs, r.Note)
	}
	notes = append(notes, fmt.Sprintf("kernel kworkers (%s): the kernel's own workqueues, recorded through tracefs during "+
		"the same rounds while %s; queue->start is workqueue_queue_work to workqueue_execute_start of immediate work, "+
		"1 us resolution. Shown for comparison; not part of the verdict.", strings.Join(wqs, ", "), helper))
	if rec.Stats.Lost > 0 {
		notes = append(notes, fmt.Sprintf("kernel kworkers: the kernel's ring buffer lost %d events; their items are left out.", rec.Stats.Lost))
	}
	return rows, notes
}

// kernelRows turns the busiest workqueues of a recording into rows:
// kblockd first when it has kernelMinItems items, then the others by
// count, at most kernelMaxRows.
func kernelRows(rep *analyze.Report, d time.Duration) []Row {
	var pick []*analyze.Group
	if g := rep.Workqueue(kernelPreferred); g != nil && g.Count >= kernelMinItems {
		pick = append(pick, g)
	}
	for _, g := range rep.Workqueues { // by count, descending
		if len(pick) >= kernelMaxRows || g.Count < kernelMinItems {
			break
		}
		if g.Workqueue != kernelPreferred {
			pick = append(pick, g)
		}
	}
	samples := map[string]*stats.Samples{}
	for _, g := range pick {
		samples[g.Workqueue] = stats.NewSamples(0)
	}
	for i := range rep.Items {
		it := &rep.Items[i]
		if s := samples[it.Workqueue]; s != nil {
			s.Add(it.QueueToStartNs())
		}
	}
	var rows []Row
	for _, g := range pick {
		s := samples[g.Workqueue]
		rows = append(rows, Row{
			ID: "kernel:" + g.Workqueue, Label: "kernel kworkers", Note: g.Workqueue,
			Kind: KindKernel, Class: ClassKernel,
			Items: s.Len(), QueueToStart: latencyOf(s), CDF: cdfOf(s), MeasuredNs: int64(d),
		})
	}
	return slices.Clip(rows)
}
