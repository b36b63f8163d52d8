package antagonist

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnvVar is the environment variable through which a parent hands a child
// its spec (JSON). A process started with it set runs as an antagonist
// child; see MaybeRunChild.
const EnvVar = "GOWQ_ANTAGONIST"

// readyFD is the descriptor on which a child reports its setup result
// (cmd.ExtraFiles[0]).
const readyFD = 3

// init runs the child before any importer's init or main can run, so that
// a program that imports this package but forgets MaybeRunChild can never
// re-run its own main as an antagonist.
func init() {
	MaybeRunChild()
}

// MaybeRunChild turns the process into an antagonist child when it was
// started as one by this package (EnvVar is set): it applies the spec's
// affinity, nice value and policy, runs the load loop until it is killed,
// and never returns. Otherwise it returns immediately.
//
// Children are re-executions of the parent's own binary (os.Executable),
// so every program that starts antagonists (wqlab's main, and TestMain in
// tests) must link this package; call MaybeRunChild first thing in main
// or TestMain to make that visible. The package's init already calls it,
// so the call is a no-op in practice, and a child never runs any of the
// program's own code.
func MaybeRunChild() {
	v, ok := os.LookupEnv(EnvVar)
	if !ok {
		return
	}
	os.Exit(runChild(v))
}

// childReport is what a child writes on readyFD after setup.
type childReport struct {
	OK    bool   `json:"ok"`
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

func runChild(v string) int {
	ready := os.NewFile(readyFD, "antagonist-ready")
	report := func(r childReport) {
		if ready == nil {
			return
		}
		b, _ := json.Marshal(r)
		_, _ = ready.Write(append(b, '\n'))
		_ = ready.Close()
		ready = nil
	}
	var cs childSpec
	if err := json.Unmarshal([]byte(v), &cs); err != nil {
		report(childReport{Err: "bad spec: " + err.Error()})
		fmt.Fprintf(os.Stderr, "antagonist child: bad %s: %v\n", EnvVar, err)
		return 2
	}
	if err := applyToAllThreads(cs); err != nil {
		r := childReport{Err: err.Error()}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		}
		report(r)
		fmt.Fprintf(os.Stderr, "antagonist child: %v\n", err)
		return 2
	}
	switch cs.Kind {
	case kindBurner:
		load := min(max(cs.LoadPct, 1), 100)
		report(childReport{OK: true})
		if cs.Mode == ModeNoop {
			burnNoop(load, time.Duration(max(cs.CycleUs, 1))*time.Microsecond)
		}
		burnQsort(load)
	case kindHog:
		report(childReport{OK: true})
		hog(min(max(cs.DutyPct, 1), 100), time.Duration(max(cs.PeriodUs, 1))*time.Microsecond)
	}
	report(childReport{Err: "unknown kind " + strconv.Quote(cs.Kind)})
	return 2
}

// applyToAllThreads applies affinity, nice and policy to every thread of
// the process. The kernel keeps these per thread, and the Go runtime may
// run the load loop on any of its threads; threads created later inherit
// the settings from their creator, so after this every thread has them.
// A thread that exits meanwhile (ESRCH) is skipped.
func applyToAllThreads(cs childSpec) error {
	done := map[int]bool{}
	for range 10 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list threads: %w", err)
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			done[tid] = true
			if err := applyToThread(tid, cs); err != nil && !errors.Is(err, unix.ESRCH) {
				return err
			}
		}
		if !fresh {
			return nil
		}
	}
	return nil
}

func applyToThread(tid int, cs childSpec) error {
	if len(cs.CPUs) > 0 {
		var set unix.CPUSet
		for _, c := range cs.CPUs {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("sched_setaffinity(%d, %v): %w", tid, cs.CPUs, err)
		}
	}
	if cs.Nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, cs.Nice); err != nil {
			return fmt.Errorf("setpriority(%d, nice %d): %w", tid, cs.Nice, err)
		}
	}
	if cs.Policy == PolicyFIFO || cs.Policy == PolicyRR {
		attr := unix.SchedAttr{Policy: uint32(cs.Policy), Priority: uint32(cs.Priority)}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			return fmt.Errorf("sched_setattr(%d, %v priority %d): %w", tid, cs.Policy, cs.Priority, err)
		}
	}
	return nil
}

// sink keeps the compiler from removing busy work.
var sink uint64

// think sleeps for busy*(100-load)/load, fio's thinktime.
func think(busy time.Duration, load int) {
	if load < 100 {
		time.Sleep(busy * time.Duration(100-load) / time.Duration(load))
	}
}

// qsortLen is the number of int32 fio's qsort mode sorts.
const qsortLen = 256 << 10

// newQsortData returns qsortLen int32 filled as fio does: once, with
// Marsaglia's multiply-with-carry generator and fio's seeds.
func newQsortData() []int32 {
	data := make([]int32, qsortLen)
	z, w := uint32(362436069), uint32(521288629)
	for i := range data {
		z = 36969*(z&65535) + (z >> 16)
		w = 18000*(w&65535) + (w >> 16)
		data[i] = int32(z<<16 + w)
	}
	return data
}

// qsortRound is one busy chunk of fio cpumode=qsort: sort ascending,
// descending, bytewise over the same memory, then descending again.
func qsortRound(data []int32) {
	bytes := unsafe.Slice((*uint8)(unsafe.Pointer(&data[0])), 4*len(data))
	slices.SortFunc(data, cmp.Compare[int32])
	slices.SortFunc(data, func(a, b int32) int { return cmp.Compare(b, a) })
	slices.SortFunc(bytes, cmp.Compare[uint8])
	slices.SortFunc(data, func(a, b int32) int { return cmp.Compare(b, a) })
}

// burnQsort is fio cpumode=qsort: rounds of qsortRound, each followed by
// a sleep that keeps the duty cycle at load%.
func burnQsort(load int) {
	data := newQsortData()
	for {
		start := time.Now()
		qsortRound(data)
		think(time.Since(start), load)
	}
}

// burnNoop is fio cpumode=noop: spin for chunk, then sleep.
func burnNoop(load int, chunk time.Duration) {
	for {
		start := time.Now()
		spinUntil(start.Add(chunk))
		think(time.Since(start), load)
	}
}

// spinUntil burns CPU until the deadline, reading the clock every few
// thousand iterations.
func spinUntil(deadline time.Time) {
	x := sink
	for time.Now().Before(deadline) {
		for range 4096 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

// hog spins; with duty < 100 it spins duty% of each period and sleeps the
// rest, anchored to the period so that drift does not accumulate.
func hog(duty int, period time.Duration) {
	if duty >= 100 {
		x := sink
		for {
			x = x*6364136223846793005 + 1442695040888963407
			if x == 0 {
				sink = x
			}
		}
	}
	busy := period * time.Duration(duty) / 100
	next := time.Now()
	for {
		spinUntil(next.Add(busy))
		next = next.Add(period)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else {
			next = time.Now() // fell behind: restart the period
		}
	}
}
