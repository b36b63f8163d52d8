package scenario

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/driver"
)

// Blocking is the name of the blocking-items experiment. It is not
// part of the default suite: `wqlab --scenario blocking` runs it alone.
const Blocking = "blocking"

// BlockingBurst is one measured burst: Config, Kind and N name it; the
// times run from the first Queue to Flush returning, in ns.
type BlockingBurst struct {
	Config       string `json:"config"`
	Kind         string `json:"kind"` // how each item blocks: "time.Sleep", "nanosleep" or "pipe read"
	N            int    `json:"n"`
	ColdNs       int64  `json:"cold_ns"`
	WarmNs       int64  `json:"warm_ns"`
	Skip         string `json:"skipped,omitempty"` // why the row was skipped, if it was
	MonitorCPUNs int64  `json:"monitor_cpu_ns"`    // CPU time of the CM monitor thread during the two bursts (per-CPU rows)
}

// BlockingResult is the blocking experiment's result: every burst, and
// the CM monitor's CPU use while idle, in us per second. Its JSON
// document has the schema driver.Schema(Blocking) (see the package doc).
type BlockingResult struct {
	driver.Doc                      // schema: driver.Schema(Blocking), set by WriteJSON
	Bursts          []BlockingBurst `json:"bursts"`
	IdleLightUsPerS float64         `json:"cm_idle_light_us_per_s"` // the first second after work (2 ms polls)
	IdleDeepUsPerS  float64         `json:"cm_idle_deep_us_per_s"`  // the two seconds after (deep idle)
}

// blockKinds are the ways an item blocks for blockFor.
var blockKinds = []string{"time.Sleep", "nanosleep", "pipe read"}

const blockFor = time.Millisecond

// blockingConfigs are the rows of the blocking experiment.
var blockingConfigs = []struct {
	name  string
	flags wq.Flags
	goRow bool
}{
	{"per-CPU normal", wq.PerCPU, false},
	{"per-CPU RT", wq.PerCPU | wq.RT, false},
	{"unbound normal", wq.Unbound, false},
	{"unbound RT", wq.Unbound | wq.RT, false},
	{"go statement", 0, true},
}

func blockingConfigNames() []string {
	var out []string
	for _, c := range blockingConfigs {
		out = append(out, c.name)
	}
	return out
}

// RunBlocking measures the blocking bursts (MeasureBlocking) and prints
// the table with ratios (BlockingResult.WriteTable). It returns ctx.Err()
// when ctx ends, having printed nothing.
func RunBlocking(ctx context.Context, w io.Writer) error {
	res, err := MeasureBlocking(ctx)
	if err != nil {
		return err
	}
	return res.WriteTable(w)
}

// MeasureBlocking measures bursts of N = 10, 100, 1000 items that each
// block for 1 ms, for every queue class and a go statement per item. All
// rows come from the same run. Cold is the first burst on a fresh queue
// (and pool: no workers yet), warm the second. A queue that cannot be
// allocated (no privilege for RT) gives a skipped row. It blocks for the
// bursts and 3 s of idle measurement, and returns ctx.Err() when ctx
// ends.
func MeasureBlocking(ctx context.Context) (*BlockingResult, error) {
	var rows []BlockingBurst
	for _, kind := range blockKinds {
		for _, n := range []int{10, 100, 1000} {
			for _, c := range blockingConfigs {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				r := BlockingBurst{Config: c.name, Kind: kind, N: n}
				if c.goRow {
					r.ColdNs = burstGo(kind, n)
					r.WarmNs = burstGo(kind, n)
				} else {
					q, err := wq.Alloc("blocking", c.flags, 0)
					if err != nil {
						r.Skip = err.Error()
						rows = append(rows, r)
						continue
					}
					cm := monitorTid()
					c0 := threadCPU(cm)
					r.ColdNs = burstWQ(q, kind, n)
					r.WarmNs = burstWQ(q, kind, n)
					r.MonitorCPUNs = threadCPU(cm) - c0
					q.Destroy()
				}
				rows = append(rows, r)
			}
		}
	}
	idleLight, idleDeep := idleMonitorCPU()
	return &BlockingResult{Bursts: rows, IdleLightUsPerS: idleLight, IdleDeepUsPerS: idleDeep}, nil
}

// WriteTable prints the bursts' table: per burst cold and warm ms, their
// ratios to the unbound row of the same class and to the go statement
// (lower is better), and the CM monitor's CPU per item; then the
// monitor's idle CPU. It returns w's error.
func (r *BlockingResult) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	writeBlockingTable(&b, r.Bursts, r.IdleLightUsPerS, r.IdleDeepUsPerS)
	_, err := w.Write(b.Bytes())
	return err
}

// WriteJSON writes r as one indented JSON document whose "schema" is
// driver.Schema(Blocking). It returns w's error.
func (r *BlockingResult) WriteJSON(w io.Writer) error {
	return driver.WriteResult(w, Blocking, r)
}

func writeBlockingTable(w io.Writer, rows []BlockingBurst, idleLight, idleDeep float64) {
	ref := func(kind string, n int, cfg string) *BlockingBurst {
		for i := range rows {
			if rows[i].Kind == kind && rows[i].N == n && rows[i].Config == cfg && rows[i].Skip == "" {
				return &rows[i]
			}
		}
		return nil
	}
	ratio := func(a, b int64) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fx", float64(a)/float64(b))
	}
	ms := func(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e6) }
	fmt.Fprintf(w, "blocking: bursts of N items that each block 1 ms; first Queue to Flush, ms; cold = fresh queue, warm = second burst\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "block\tN\tqueue\tcold ms\twarm ms\tcold/unbound\twarm/unbound\tcold/go\twarm/go\tcm CPU us/item")
	// A skipped row shows a short mark; each distinct reason is printed
	// once under the table, so that long reasons do not break the columns.
	var reasons []string
	for _, r := range rows {
		if r.Skip != "" {
			k := slices.Index(reasons, r.Skip)
			if k < 0 {
				reasons = append(reasons, r.Skip)
				k = len(reasons) - 1
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\tskipped [%d]\t\t\t\t\t\t\n", r.Kind, r.N, r.Config, k+1)
			continue
		}
		ub := "unbound normal"
		if strings.HasSuffix(r.Config, "RT") {
			ub = "unbound RT"
		}
		uc, uw := "-", "-"
		if u := ref(r.Kind, r.N, ub); u != nil && strings.HasPrefix(r.Config, "per-CPU") {
			uc, uw = ratio(r.ColdNs, u.ColdNs), ratio(r.WarmNs, u.WarmNs)
		}
		gc, gw := "-", "-"
		if g := ref(r.Kind, r.N, "go statement"); g != nil && r.Config != "go statement" {
			gc, gw = ratio(r.ColdNs, g.ColdNs), ratio(r.WarmNs, g.WarmNs)
		}
		cpu := "-"
		if strings.HasPrefix(r.Config, "per-CPU") && r.MonitorCPUNs > 0 {
			cpu = fmt.Sprintf("%.2f", float64(r.MonitorCPUNs)/1e3/float64(2*r.N))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Kind, r.N, r.Config, ms(r.ColdNs), ms(r.WarmNs), uc, uw, gc, gw, cpu)
	}
	tw.Flush()
	for i, r := range reasons {
		fmt.Fprintf(w, "skipped [%d]: %s\n", i+1, r)
	}
	fmt.Fprintf(w, "ratios: lower is better (x1.0 = as fast as the reference); cm CPU us/item: the CM monitor thread's CPU per item, per-CPU rows only (the CM monitor: gowq's concurrency-management thread, which samples busy per-CPU workers every 1 ms and wakes another worker when one blocks, as the kernel's scheduler hooks do)\n")
	fmt.Fprintf(w, "CM monitor CPU while idle: %.1f us/s in the first second after work (2 ms polls), %.2f us/s after (deep idle)\n", idleLight, idleDeep)
}

// block blocks the calling thread for blockFor in the given way. fds is a
// pipe for "pipe read": a timer writes one byte 1 ms from now and the
// item reads it with a blocking read(2).
func block(kind string, fds [2]int) {
	switch kind {
	case "time.Sleep":
		time.Sleep(blockFor)
	case "nanosleep":
		labsys.SleepThread(blockFor)
	case "pipe read":
		time.AfterFunc(blockFor, func() { _, _ = syscall.Write(fds[1], []byte{1}) })
		var b [1]byte
		for {
			if _, err := syscall.Read(fds[0], b[:]); err != syscall.EINTR {
				return
			}
		}
	}
}

func pipes(kind string, n int) ([][2]int, func()) {
	ps := make([][2]int, n)
	if kind != "pipe read" {
		return ps, func() {}
	}
	for i := range ps {
		var fd [2]int
		if err := syscall.Pipe2(fd[:], syscall.O_CLOEXEC); err != nil {
			panic(err)
		}
		ps[i] = fd
	}
	return ps, func() {
		for _, fd := range ps {
			syscall.Close(fd[0])
			syscall.Close(fd[1])
		}
	}
}

func burstWQ(q *wq.Workqueue, kind string, n int) int64 {
	ps, done := pipes(kind, n)
	defer done()
	works := make([]*wq.Work, n)
	for i := range works {
		fd := ps[i]
		works[i] = wq.NewWork(func() { block(kind, fd) })
	}
	t0 := time.Now()
	for _, wk := range works {
		q.Queue(wk)
	}
	q.Flush()
	return int64(time.Since(t0))
}

func burstGo(kind string, n int) int64 {
	ps, done := pipes(kind, n)
	defer done()
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		fd := ps[i]
		go func() { block(kind, fd); wg.Done() }()
	}
	wg.Wait()
	return int64(time.Since(t0))
}

// monitorTid returns the tid of the CM monitor thread ("gowq/cm"), 0 if
// there is none.
func monitorTid() int {
	for i := 0; i < 100; i++ {
		ms, _ := filepath.Glob("/proc/self/task/*/comm")
		for _, m := range ms {
			b, err := os.ReadFile(m)
			if err == nil && strings.TrimSpace(string(b)) == "gowq/cm" {
				var tid int
				fmt.Sscan(filepath.Base(filepath.Dir(m)), &tid)
				return tid
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0
}

func threadCPU(tid int) int64 {
	if tid == 0 {
		return 0
	}
	c, _ := labsys.ThreadCPUTime(tid)
	return int64(c)
}

// idleMonitorCPU returns the CM monitor's CPU use, in us per second, over
// the first second after a per-CPU queue was used (light idle) and over
// the next two seconds (deep idle), with the queue still allocated.
func idleMonitorCPU() (light, deep float64) {
	q, err := wq.Alloc("blocking-idle", wq.PerCPU, 0)
	if err != nil {
		return 0, 0
	}
	defer q.Destroy()
	burstWQ(q, "nanosleep", 10)
	cm := monitorTid()
	c0 := threadCPU(cm)
	time.Sleep(time.Second)
	c1 := threadCPU(cm)
	time.Sleep(2 * time.Second)
	c2 := threadCPU(cm)
	return float64(c1-c0) / 1e3, float64(c2-c1) / 1e3 / 2
}
