package wq_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/sched"
	"github.com/gowq/wq/internal/testutil"
)

// parseUnit reads the [Service] section of a systemd unit file: key ->
// values in order.
func parseUnit(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		case section == "Service":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: malformed line %q", file, line)
			}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

const unitChildEnv = "GOWQ_UNIT_CHILD"

// TestSystemdUnit checks docs/deploy's unit: it grants what gowq's RT
// queues need, and, where systemd is PID 1, a transient unit with its
// [Service] settings (as user nobody) can allocate an RT queue and run an
// item, with DiagnoseClass finding nothing in the way.
func TestSystemdUnit(t *testing.T) {
	if os.Getenv(unitChildEnv) != "" {
		if bs := sched.DiagnoseClass(sched.Attr{Policy: sched.PolicyFIFO, Priority: 50}); len(bs) > 0 {
			t.Fatalf("in the unit: %v", bs)
		}
		q, err := wq.Alloc("unit-rt", wq.PerCPU|wq.RT, 0)
		if err != nil {
			t.Fatalf("Alloc(RT) in the unit: %v", err)
		}
		defer q.Destroy()
		ran := false
		w := wq.NewWork(func() { ran = true })
		q.Queue(w)
		w.Flush()
		if !ran {
			t.Fatal("item did not run")
		}
		return
	}
	u := parseUnit(t, "docs/deploy/gowq-app.service")
	for k, want := range map[string]string{
		"AmbientCapabilities": "CAP_SYS_NICE", "LimitRTPRIO": "50", "LimitMEMLOCK": "infinity",
		"LimitNICE": "40", "CPUAffinity": "", "CPUAccounting": "no",
	} {
		v, ok := u[k]
		if !ok || want != "" && !strings.Contains(strings.Join(v, " "), want) {
			t.Errorf("unit: %s=%v, want %q", k, v, want)
		}
	}
	comm, _ := os.ReadFile("/proc/1/comm")
	if strings.TrimSpace(string(comm)) != "systemd" {
		t.Skipf("PID 1 is %q, not systemd: systemd-run cannot start the unit here (the unit's settings were checked)", strings.TrimSpace(string(comm)))
	}
	requireRoot(t)
	if _, err := exec.LookPath("systemd-run"); err != nil {
		t.Skip("no systemd-run")
	}
	cmd, _ := testutil.NobodyCommand(t, []string{"-test.run=^TestSystemdUnit$", "-test.v"})
	args := []string{"--wait", "--pipe", "--collect", "-p", "User=nobody", "--setenv=" + unitChildEnv + "=1", "--working-directory=" + cmd.Dir}
	for k, vs := range u {
		switch k {
		case "ExecStart", "Type", "User", "CPUAffinity":
			continue // the test's own; CPUAffinity=1 may not exist here
		}
		for _, v := range vs {
			args = append(args, "-p", k+"="+v)
		}
	}
	args = append(args, cmd.Path)
	args = append(args, cmd.Args[1:]...)
	out, err := exec.Command("systemd-run", args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("systemd-run %v: %v\n%s", args, err, out)
	}
}
