package wake

// The evidence readers of explain mode: the threads' scheduler figures
// from /proc and getrusage, the pools' lock waits from wq.Pools, and the
// Go runtime's own figures (the tracer's stop-the-world ranges,
// runtime/metrics' histograms).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/metrics"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"

	xtrace "golang.org/x/exp/trace"
	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/stats"
)

// threadStat is one reading of a thread's scheduler figures.
type threadStat struct {
	tid      int
	runDelay int64 // ns waited runnable on a run queue (schedstat field 2)
	nvcsw    int64 // voluntary context switches
	ok       bool
}

// statReader reads the calling thread's figures cheaply: a pread of its
// cached /proc/self/task/<tid>/schedstat descriptor and a getrusage.
// Safe for concurrent use.
type statReader struct {
	mu  sync.Mutex
	fds map[int]int
}

func newStatReader() *statReader { return &statReader{fds: map[int]int{}} }

func (r *statReader) fd(tid int, fresh bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fd, ok := r.fds[tid]; ok && !fresh {
		return fd
	} else if ok {
		unix.Close(fd)
		delete(r.fds, tid)
	}
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(tid)+"/schedstat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	r.fds[tid] = fd
	return fd
}

// read reads the calling thread's figures; ok is false when the
// goroutine changed threads meanwhile or /proc could not be read.
func (r *statReader) read() threadStat {
	tid := unix.Gettid()
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return threadStat{}
	}
	var buf [96]byte
	var n int
	for try := 0; try < 2; try++ {
		fd := r.fd(tid, try > 0)
		if fd < 0 {
			return threadStat{}
		}
		var err error
		if n, err = unix.Pread(fd, buf[:], 0); err == nil && n > 0 {
			break
		}
		n = 0 // a dead thread's tid reused: open it afresh
	}
	delay, ok := parseSchedstat(buf[:n])
	if !ok || unix.Gettid() != tid {
		return threadStat{}
	}
	return threadStat{tid: tid, runDelay: delay, nvcsw: ru.Nvcsw, ok: true}
}

func (r *statReader) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for tid, fd := range r.fds {
		unix.Close(fd)
		delete(r.fds, tid)
	}
}

// parseSchedstat returns the 2nd field (run_delay, ns) of a schedstat
// line "<on-cpu ns> <run_delay ns> <timeslices>".
func parseSchedstat(b []byte) (int64, bool) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(b) || b[i] != ' ' {
		return 0, false
	}
	i++
	var v int64
	j := i
	for ; j < len(b) && b[j] >= '0' && b[j] <= '9'; j++ {
		v = v*10 + int64(b[j]-'0')
	}
	if j == i || (j < len(b) && b[j] != ' ' && b[j] != '\n') {
		return 0, false
	}
	return v, true
}

// lockWaits sums PoolInfo.LockWaits over every live pool.
func lockWaits() int64 {
	var n int64
	for _, p := range wq.Pools() {
		n += p.LockWaits
	}
	return n
}

// clockOffset returns CLOCK_MONOTONIC (labsys.MonotonicNow, the stages'
// clock) minus stats.Now(), from the closest of a few paired reads.
func clockOffset() int64 {
	var off, best int64 = 0, math.MaxInt64
	for range 5 {
		a := stats.Now()
		m := labsys.MonotonicNow()
		b := stats.Now()
		if b-a < best {
			best, off = b-a, m-(a+b)/2
		}
	}
	return off
}

const traceCategory = "wqlab-wake-anchor"

// startTrace starts the runtime tracer, with an anchor event that maps
// the trace's clock onto stats.Now(). The trace goes to a temporary file
// (removed at once, read back by stopTrace), not to memory: a growing
// buffer on the heap would make GC cycles of its own.
func (x *explainer) startTrace() {
	f, err := os.CreateTemp("", "wqlab-wake-*.trace")
	if err != nil {
		x.tnote = err.Error()
		return
	}
	os.Remove(f.Name())
	if err := trace.Start(f); err != nil {
		f.Close()
		x.tnote = err.Error()
		return
	}
	x.tfile = f
	a := stats.Now()
	trace.Log(context.Background(), traceCategory, "anchor")
	x.anchor = (a + stats.Now()) / 2
}

// stopTrace stops the tracer and reads the stop-the-world ranges.
func (x *explainer) stopTrace() {
	f := x.tfile
	if f == nil {
		return
	}
	x.tfile = nil
	trace.Stop()
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		x.tnote = err.Error()
		return
	}
	stw, err := parseSTW(bufio.NewReaderSize(f, 1<<20), x.anchor)
	if err != nil {
		x.tnote = err.Error()
		return
	}
	x.stw = stw
}

// parseSTW returns the stop-the-world ranges of a runtime trace, in the
// clock of the anchor: anchor is the stats.Now() of the first log event
// of category traceCategory.
func parseSTW(r io.Reader, anchor int64) ([][2]int64, error) {
	tr, err := xtrace.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	ranges := [][2]int64{}
	var off int64
	anchored := false
	begin := int64(-1)
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		switch ev.Kind() {
		case xtrace.EventLog:
			if !anchored && ev.Log().Category == traceCategory {
				off, anchored = int64(ev.Time())-anchor, true
			}
		case xtrace.EventRangeBegin:
			if strings.HasPrefix(ev.Range().Name, "stop-the-world") {
				begin = int64(ev.Time())
			}
		case xtrace.EventRangeEnd:
			if strings.HasPrefix(ev.Range().Name, "stop-the-world") && begin >= 0 {
				ranges = append(ranges, [2]int64{begin, int64(ev.Time())})
				begin = -1
			}
		}
	}
	if !anchored {
		return nil, errors.New("trace: no anchor event")
	}
	for i := range ranges {
		ranges[i][0] -= off
		ranges[i][1] -= off
	}
	return ranges, nil
}

var explainMetrics = []string{"/gc/cycles/total:gc-cycles", "/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

func readMetrics() []metrics.Sample {
	s := make([]metrics.Sample, len(explainMetrics))
	for i, n := range explainMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return s
}

// histDelta returns the p99 and max (us, bucket upper bounds; a finite
// lower bound for the last, unbounded bucket) and the count of the
// samples b recorded beyond a.
func histDelta(a, b *metrics.Float64Histogram) (p99, maxUs float64, n uint64) {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return 0, 0, 0
	}
	d := make([]uint64, len(b.Counts))
	for i := range d {
		d[i] = b.Counts[i] - a.Counts[i]
		n += d[i]
	}
	if n == 0 {
		return 0, 0, 0
	}
	upper := func(i int) float64 {
		v := b.Buckets[i+1]
		if math.IsInf(v, 1) {
			v = b.Buckets[i]
		}
		return v * 1e6
	}
	rank := uint64(math.Ceil(0.99 * float64(n)))
	var cum uint64
	for i, c := range d {
		cum += c
		if cum >= rank && p99 == 0 {
			p99 = upper(i)
		}
		if c > 0 {
			maxUs = upper(i)
		}
	}
	return p99, maxUs, n
}
