package main

import (
	"fmt"
	"io"
	"os"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/sys/unix"

	"github.com/gowq/wq/lab/scenario"
)

// progressUI shows one mpb progress bar per scenario on a terminal, and
// one plain line per phase otherwise.
type progressUI struct {
	w     io.Writer
	bars  bool
	p     *mpb.Progress
	bar   *mpb.Bar
	name  string
	total int
}

func newProgressUI(w io.Writer, bars bool) *progressUI { return &progressUI{w: w, bars: bars} }

func (u *progressUI) update(p scenario.Progress) {
	switch p.Phase {
	case scenario.PhasePrepare:
		fmt.Fprintf(u.w, "%s: preparing\n", p.Scenario)
	case scenario.PhaseMeasure:
		if p.Scenario != u.name || u.total != p.Total {
			u.finish()
			u.name, u.total = p.Scenario, p.Total
			if !u.bars {
				fmt.Fprintf(u.w, "%s: measuring %d slices\n", p.Scenario, p.Total)
				return
			}
			u.p = mpb.New(mpb.WithOutput(u.w), mpb.WithWidth(48))
			u.bar = u.p.AddBar(int64(max(p.Total, 1)),
				mpb.PrependDecorators(decor.Name(fmt.Sprintf("%-8s", p.Scenario)), decor.CountersNoUnit(" %d/%d slices")),
				mpb.AppendDecorators(decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO), "done")),
			)
		}
		if u.bar != nil {
			u.bar.SetCurrent(int64(p.Done))
		}
	case scenario.PhaseDone:
		u.finish()
	}
}

// finish completes and flushes the current bar, if any.
func (u *progressUI) finish() {
	if u.p != nil {
		if !u.bar.Completed() {
			u.bar.SetTotal(-1, true)
		}
		u.p.Wait()
	}
	u.p, u.bar, u.name, u.total = nil, nil, "", 0
}

// isTerminal reports whether w is a terminal with a known width (a
// pseudo-terminal of width 0 cannot show bars).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil && ws.Col > 0
}
