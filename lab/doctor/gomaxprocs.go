package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// checkGOMAXPROCS reports the condition under which the RT classes keep
// their latency (docs/deploy.md, "Go runtime settings for RT programs"):
// a woken RT worker thread needs a Go P, and waits for one behind the
// program's goroutines while they keep every P busy. What doctor can see
// from outside is the number of Ps: GOMAXPROCS in the process's
// environment, against the CPUs it may use. The wait itself is in the
// program: wq.QueueStats.PWait, gowq_workqueue_p_wait_seconds.
func (m *machine) checkGOMAXPROCS() Check {
	c := Check{ID: "gomaxprocs", Name: "GOMAXPROCS",
		Why: "a woken RT worker thread still needs one of GOMAXPROCS Ps to run Go code: RT keeps its latency only while the program's runnable goroutines are fewer than the Ps (its P wait: Stats().PWait, gowq_workqueue_p_wait_seconds); fewer Ps than CPUs makes that sooner"}
	env, err := m.read(fmt.Sprintf("/proc/%d/environ", m.env.pid()))
	val := ""
	if err == nil {
		for _, kv := range strings.Split(env, "\x00") {
			if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
				val = v
			}
		}
	}
	ncpu := m.allowed.Len()
	if val == "" {
		c.Status = OK
		c.Value = "not set in the environment: the runtime uses the process's CPU count"
		if ncpu > 0 {
			c.Value += " (" + strconv.Itoa(ncpu) + ")"
		}
		return c
	}
	n, perr := strconv.Atoi(val)
	c.Value = "GOMAXPROCS=" + val
	if ncpu > 0 {
		c.Value += " for " + strconv.Itoa(ncpu) + " CPUs"
	}
	switch {
	case perr != nil || n < 1:
		c.Status = Warn
		c.Value += " (not a positive number: the runtime ignores it)"
		c.Remedy = "unset GOMAXPROCS or set it to the number of CPUs the process may use"
	case ncpu > 0 && n < ncpu:
		c.Status = Warn
		c.Value += " (fewer Ps than CPUs: RT workers wait for a P as soon as " + val + " goroutines are runnable)"
		c.Remedy = "unset GOMAXPROCS (the runtime follows the CPUs and the cgroup limit) or raise it to the CPU count; keep the program's CPU-bound goroutines fewer than the Ps"
	default:
		c.Status = OK
	}
	return c
}
