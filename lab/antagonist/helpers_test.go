package antagonist

import "github.com/gowq/wq/internal/sched"

// settableNice returns want if this process may give a thread nice want
// (tried on a short-lived thread), else 19, which any thread may take. An
// unprivileged process started under nice -n 19 may not lower a child's
// nice below 19 (setpriority says EPERM), so a test that checks that a
// spec's nice is applied asks for one the process may set.
func settableNice(want int) int {
	if sched.Probe(nil, &sched.Attr{Policy: sched.PolicyNormal, Nice: want}) == nil {
		return want
	}
	return 19
}
