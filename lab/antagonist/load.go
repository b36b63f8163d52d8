package antagonist

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// LoadMeter measures the utilisation the CPUs achieved between its start
// and each Read, from /proc/stat, so a report can show that an antagonist
// really loaded the machine. It is safe for concurrent use (it is
// immutable after StartLoadMeter).
type LoadMeter struct {
	fs    procfs.FS
	t0    time.Time
	start procfs.Stat
}

// CPULoad is the utilisation of one CPU.
type CPULoad struct {
	CPU     int     // CPU number as in /proc/stat
	BusyPct float64 // (user+nice+system+irq+softirq+steal) / total, in %, 0..100
}

// Load is what a LoadMeter measured.
type Load struct {
	Wall   time.Duration // time between StartLoadMeter and Read
	PerCPU []CPULoad     // by CPU number; CPUs that came or went meanwhile are left out
	AllPct float64       // the same ratio over all CPUs together, in %
}

// String formats the load, e.g. "cpu0 92.1% cpu1 95.3% all 93.7% over 1.00s".
func (l Load) String() string {
	var b strings.Builder
	for _, c := range l.PerCPU {
		fmt.Fprintf(&b, "cpu%d %.1f%% ", c.CPU, c.BusyPct)
	}
	fmt.Fprintf(&b, "all %.1f%% over %.2fs", l.AllPct, l.Wall.Seconds())
	return b.String()
}

// StartLoadMeter samples /proc/stat now. It returns an error when
// /proc/stat cannot be read or parsed.
func StartLoadMeter() (*LoadMeter, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return nil, fmt.Errorf("antagonist: load meter: %w", err)
	}
	return startLoadMeterFS(fs)
}

func startLoadMeterFS(fs procfs.FS) (*LoadMeter, error) {
	st, err := fs.Stat()
	if err != nil {
		return nil, fmt.Errorf("antagonist: load meter: %w", err)
	}
	return &LoadMeter{fs: fs, t0: time.Now(), start: st}, nil
}

// Read samples /proc/stat again and returns the utilisation since
// StartLoadMeter: busy time (user+nice+system+irq+softirq+steal; guest
// time is already part of user) over total time (busy+idle+iowait), per
// CPU and overall. It may be called any number of times. The kernel
// counts in ticks (usually 10 ms), so short intervals are coarse. It
// returns an error when /proc/stat cannot be read.
func (m *LoadMeter) Read() (Load, error) {
	st, err := m.fs.Stat()
	if err != nil {
		return Load{}, fmt.Errorf("antagonist: load meter: %w", err)
	}
	l := Load{Wall: time.Since(m.t0)}
	var busyAll, totalAll float64
	for cpu, end := range st.CPU {
		begin, ok := m.start.CPU[cpu]
		if !ok {
			continue
		}
		b0, t0 := busyTotal(begin)
		b1, t1 := busyTotal(end)
		busy, total := b1-b0, t1-t0
		pct := 0.0
		if total > 0 {
			pct = min(max(100*busy/total, 0), 100)
		}
		l.PerCPU = append(l.PerCPU, CPULoad{CPU: int(cpu), BusyPct: pct})
		busyAll += busy
		totalAll += total
	}
	slices.SortFunc(l.PerCPU, func(a, b CPULoad) int { return a.CPU - b.CPU })
	if totalAll > 0 {
		l.AllPct = min(max(100*busyAll/totalAll, 0), 100)
	}
	return l, nil
}

func busyTotal(c procfs.CPUStat) (busy, total float64) {
	busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return busy, busy + c.Idle + c.Iowait
}
