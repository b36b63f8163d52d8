package wq_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goTool returns the go command for the tests that run it, and the
// environment for it in this workspace (GOFLAGS without -mod=mod, which
// workspace mode rejects). It skips the test in -short mode or without a go
// command.
func goTool(t *testing.T) (string, []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	var env []string
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "GOFLAGS="); ok {
			kv = "GOFLAGS=" + strings.Join(strings.Fields(strings.ReplaceAll(v, "-mod=mod", "")), " ")
		}
		env = append(env, kv)
	}
	return goBin, env
}

// TestWorkspaceBuildsWithoutCgo catches a package that no longer builds or
// vets with CGO_ENABLED=0 (no gcc, or a static build): a cgo-only package
// needs a !cgo file, as lab/probe has.
func TestWorkspaceBuildsWithoutCgo(t *testing.T) {
	goBin, env := goTool(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	env = append(env, "CGO_ENABLED=0")
	pkgs := []string{"./...", "./lab/...", "./cmd/...", "./metrics/..."}
	// -buildvcs=false: the checkout may be a copy whose .git the user
	// cannot read, and stamping is not what is tested.
	for _, args := range [][]string{{"build", "-buildvcs=false"}, {"vet"}} {
		cmd := exec.Command(goBin, append(args, pkgs...)...)
		cmd.Dir, cmd.Env = root, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("CGO_ENABLED=0 go %s %s: %v\n%s", strings.Join(args, " "), strings.Join(pkgs, " "), err, out)
		}
	}
}

// TestWakeLabSkipsProbeWithoutCgo catches a cgo-free wqlab that fails, or
// that drops the raw-probe rows without saying why.
func TestWakeLabSkipsProbeWithoutCgo(t *testing.T) {
	goBin, env := goTool(t)
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "run", "./cmd/wqlab", "wake", "--load", "none", "--samples", "20",
		"--configs", "raw probe SCHED_OTHER,gowq normal per-CPU")
	cmd.Dir, cmd.Env = root, append(env, "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("CGO_ENABLED=0 go run ./cmd/wqlab wake: %v\n%s", err, out)
	}
	var probeRow, normalRow string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "| raw probe SCHED_OTHER "):
			probeRow = line
		case strings.HasPrefix(line, "| gowq normal per-CPU "):
			normalRow = line
		}
	}
	if !strings.Contains(probeRow, "skipped: raw probe needs cgo") {
		t.Errorf("raw-probe row %q does not say it is skipped for lack of cgo:\n%s", probeRow, out)
	}
	if normalRow == "" || strings.Contains(normalRow, "skipped") {
		t.Errorf("gowq row %q not measured:\n%s", normalRow, out)
	}
}
