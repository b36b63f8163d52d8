package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/doctor"
)

// useDoctorFixture points `wqlab doctor` at one of lab/doctor's fixture
// trees for the test.
func useDoctorFixture(t *testing.T, name string) {
	t.Helper()
	old := doctorEnv
	doctorEnv = doctor.Env{
		Root:       "../../lab/doctor/testdata/" + name,
		PID:        4242,
		Sleep:      func(time.Duration) {},
		TimerSlack: func() (int64, error) { return 50_000, nil },
		Diagnose:   func(labsys.ThreadAttr) []labsys.ClassBlocker { return nil },
	}
	t.Cleanup(func() { doctorEnv = old })
}

// TestDoctorJSON: --json prints one document with every check, and the
// exit status says whether one FAILed.
func TestDoctorJSON(t *testing.T) {
	for _, tc := range []struct {
		tree  string
		code  int
		fails int
	}{{"good", exitOK, 0}, {"bad", exitFail, 2}} {
		useDoctorFixture(t, tc.tree)
		code, stdout, stderr := run(t, "doctor", "--json")
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr %s", tc.tree, code, tc.code, stderr)
		}
		var r doctor.Report
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%s: stdout is not one JSON report: %v\n%s", tc.tree, err, stdout)
		}
		if len(r.Checks) != len(doctor.IDs) || r.Fail != tc.fails {
			t.Errorf("%s: %d checks (want %d), %d FAIL (want %d)", tc.tree, len(r.Checks), len(doctor.IDs), r.Fail, tc.fails)
		}
		for i, c := range r.Checks {
			if i < len(doctor.IDs) && c.ID != doctor.IDs[i] {
				t.Errorf("%s: check %d is %q, want %q", tc.tree, i, c.ID, doctor.IDs[i])
			}
			if c.Status == "" || c.Value == "" || c.Why == "" {
				t.Errorf("%s: incomplete check %+v", tc.tree, c)
			}
		}
		if tc.fails > 0 && !strings.Contains(stderr, "2 check(s) FAILed") {
			t.Errorf("%s: stderr %q", tc.tree, stderr)
		}
	}
}

func TestDoctorText(t *testing.T) {
	useDoctorFixture(t, "bad")
	code, stdout, _ := run(t, "doctor")
	if code != exitFail {
		t.Errorf("exit %d, want %d", code, exitFail)
	}
	for _, w := range []string{"STATUS  CHECK", "FAIL    RLIMIT_RTPRIO", "remedy: ", "4 OK, 13 WARN, 2 FAIL"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	if code, _, stderr := run(t, "doctor", "extra"); code != exitUsage {
		t.Errorf("doctor extra: exit %d (%s)", code, stderr)
	}
}

// TestDoctorRealMachine: on this machine, whoever runs it, the command
// prints a JSON report with every check and exits 0 or 1 accordingly.
func TestDoctorRealMachine(t *testing.T) {
	code, stdout, stderr := run(t, "doctor", "--json")
	var r doctor.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s%s", err, stdout, stderr)
	}
	if want := map[bool]int{false: exitOK, true: exitFail}[r.Fail > 0]; code != want {
		t.Errorf("exit %d with %d FAIL", code, r.Fail)
	}
	if len(r.Checks) < len(doctor.IDs) {
		t.Errorf("%d checks", len(r.Checks))
	}
}
