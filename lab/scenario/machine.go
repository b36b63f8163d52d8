package scenario

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
)

// DetectMachine returns the facts about this machine and process that a
// results document records: CPUs, kernel, Go version and privileges. It
// reads /proc and calls uname; fields it cannot read stay empty. It does
// not fail.
func DetectMachine() Machine {
	m := Machine{
		CPUs:       runtime.NumCPU(),
		OnlineCPUs: wq.OnlineCPUs(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Arch:       runtime.GOARCH,
		GoVersion:  runtime.Version(),
		CPUModel:   cpuModel(),
		Privileges: DetectPrivileges(),
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
		m.KernelVersion = unix.ByteSliceToString(u.Version[:])
	}
	rt, err1 := os.ReadFile("/proc/sys/kernel/sched_rt_runtime_us")
	per, err2 := os.ReadFile("/proc/sys/kernel/sched_rt_period_us")
	if err1 == nil && err2 == nil {
		m.RTThrottle = strings.TrimSpace(string(rt)) + "/" + strings.TrimSpace(string(per))
	}
	_, err := exec.LookPath("fio")
	m.FioInstalled = err == nil
	return m
}

// DetectPrivileges reports whether this process may run SCHED_FIFO
// workers (the RT rows) and nice -20 workers and hogs (the highpri rows
// and seed 004's hog), with the reason and the remedy when it may not.
// It asks the kernel (capget, getrlimit) and changes nothing.
func DetectPrivileges() Privileges {
	p := Privileges{UID: os.Getuid(), EUID: os.Geteuid(), CapSysNice: labsys.HasCapSysNice()}
	if err := labsys.CheckRT(wq.RTPriority()); err != nil {
		p.SchedFIFONote = err.Error()
	} else {
		p.SchedFIFO = true
	}
	if err := labsys.CheckNice(-20); err != nil {
		p.Nice20Note = err.Error()
	} else {
		p.Nice20 = true
	}
	return p
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
