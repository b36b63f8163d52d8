package wqhttp

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gowq/wq"
)

// MonitorRow is one workqueue's counters in /monitor?format=json. The
// field names are those of the kernel's wq_monitor.py -j output, plus
// infl, flags, policy, ordered and panics. Counters are totals since the
// queue was allocated.
type MonitorRow struct {
	Name       string `json:"name"`
	Unbound    bool   `json:"unbound"`
	Ordered    bool   `json:"ordered"`
	MemReclaim bool   `json:"mem_reclaim"`
	Flags      string `json:"flags"`  // e.g. "UNBOUND|HIGHPRI"
	Policy     string `json:"policy"` // normal, highpri or fifo
	Started    int64  `json:"started"`
	Completed  int64  `json:"completed"`
	Infl       int64  `json:"infl"`     // started - completed
	CPUTimeUs  int64  `json:"cpu_time"` // us, as the kernel's PWQ_STAT_CPU_TIME
	// CPUIntensive and CMWakeup count for per-CPU queues, Repatriated for
	// unbound ones, Mayday and Rescued for MemReclaim ones (wq_monitor.py
	// prints "-" otherwise).
	CPUIntensive int64 `json:"cpu_intensive"`
	CMWakeup     int64 `json:"cm_wakeup"`
	Repatriated  int64 `json:"repatriated"`
	Mayday       int64 `json:"mayday"`
	Rescued      int64 `json:"rescued"`
	Panics       int64 `json:"panics"`
	// Escaped (ESC, a gowq extension) counts items of a per-CPU queue with
	// escape_after that ran on another CPU; EscapeAfterUs is the queue's
	// escape_after in us (0: off). The table prints ESC as "-" for queues
	// that never escape.
	Escaped       int64 `json:"escaped"`
	EscapeAfterUs int64 `json:"escape_after_us"`
	// FallbackReason is why the queue runs at a lower class than it asked
	// for (wq.AllowRTFallback; Stats().FallbackReason), "" when it got its
	// class. A gowq extension, left out of the JSON when empty.
	FallbackReason string `json:"fallback_reason,omitempty"`
}

// MonitorSample is the body of /monitor?format=json.
type MonitorSample struct {
	// Timestamp is when the sample was taken, in seconds since the Unix
	// epoch (wq_monitor.py's time.time()).
	Timestamp  float64      `json:"timestamp"`
	Workqueues []MonitorRow `json:"workqueues"`
}

// Monitor returns the counters of every live workqueue (wq.Queues(false)),
// sorted by name, keeping only the names filter matches when filter is not
// nil. It never blocks on work items.
func Monitor(filter *regexp.Regexp) MonitorSample {
	s := MonitorSample{Timestamp: float64(time.Now().UnixNano()) / 1e9, Workqueues: []MonitorRow{}}
	for _, q := range wq.Queues(false) {
		if filter != nil && !filter.MatchString(q.Name()) {
			continue
		}
		st := q.Stats()
		f := q.Flags()
		s.Workqueues = append(s.Workqueues, MonitorRow{
			Name: st.Name, Unbound: f&wq.Unbound != 0, Ordered: q.Type() == wq.TypeOrdered, MemReclaim: f&wq.MemReclaim != 0,
			Flags: f.String(), Policy: st.Policy.String(),
			Started: st.Total, Completed: st.Total - st.Infl, Infl: max(st.Infl, 0), CPUTimeUs: st.CPUTime.Microseconds(),
			CPUIntensive: st.CPUItsv, CMWakeup: st.CMW, Repatriated: st.RPR,
			Mayday: st.Mayday, Rescued: st.Rescued, Panics: st.Panics,
			Escaped: st.ESC, EscapeAfterUs: st.EscapeAfter.Microseconds(), FallbackReason: st.FallbackReason,
		})
	}
	return s
}

// monitorHeader is the header line of the wq_monitor.py table.
var monitorHeader = fmt.Sprintf("%24s %8s %5s %8s %7s %7s %7s %7s %7s", "", "total", "infl", "CPUtime", "CPUitsv", "CMW/RPR", "mayday", "rescued", "ESC")

// FormatMonitorRow formats r as one line of the wq_monitor.py table, without
// a newline: the last 24 characters of the name, total, infl, CPUtime in
// seconds (with three decimals where wq_monitor.py prints one: its CPU
// time is sampled at scheduler ticks, gowq's is read from each worker
// thread's CPU clock and is exact), then CPUitsv and CMW (per-CPU queues) or "-"
// and RPR (unbound queues), mayday and rescued ("-" unless MemReclaim),
// and ESC ("-" unless the queue has escape_after or has escaped items).
func FormatMonitorRow(r MonitorRow) string {
	dash := func(ok bool, v int64) string {
		if ok {
			return strconv.FormatInt(v, 10)
		}
		return "-"
	}
	itsv, cmwRPR := dash(!r.Unbound, r.CPUIntensive), strconv.FormatInt(r.CMWakeup, 10)
	if r.Unbound {
		cmwRPR = strconv.FormatInt(r.Repatriated, 10)
	}
	return fmt.Sprintf("%-24s %8d %5d %8.3f %7s %7s %7s %7s %7s", lastRunes(r.Name, 24), r.Started, max(r.Infl, 0),
		float64(r.CPUTimeUs)/1e6, itsv, cmwRPR, dash(r.MemReclaim, r.Mayday), dash(r.MemReclaim, r.Rescued),
		dash(!r.Unbound && (r.EscapeAfterUs > 0 || r.Escaped > 0), r.Escaped))
}

// WriteMonitorTable writes the header line of wq_monitor.py's table
// ("total  infl  CPUtime CPUitsv CMW/RPR  mayday rescued     ESC") and one FormatMonitorRow line per
// row, as one sample of wq_monitor.py. It returns the first write error.
func WriteMonitorTable(w io.Writer, rows []MonitorRow) error {
	var b strings.Builder
	b.WriteString(monitorHeader)
	b.WriteByte('\n')
	for _, r := range rows {
		b.WriteString(FormatMonitorRow(r))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (h *handler) monitor(w http.ResponseWriter, r *http.Request) {
	if !checkFormat(w, r) {
		return
	}
	re, ok := queueFilter(w, r)
	if !ok {
		return
	}
	s := Monitor(re)
	if wantJSON(r) {
		writeJSON(w, s)
		return
	}
	textHeader(w)
	_ = WriteMonitorTable(w, s.Workqueues)
}
