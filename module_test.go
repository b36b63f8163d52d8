package wq_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibraryModuleGraph: a program that imports only github.com/gowq/wq
// must not get the lab's dependencies in its module graph. It builds a
// scratch module that requires this one (through a replace to this
// checkout) and reads `go mod graph`.
func TestLibraryModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module scratch\n\ngo 1.26.0\n\nrequire github.com/gowq/wq v0.0.0\n\nreplace github.com/gowq/wq => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/gowq/wq"
	"github.com/gowq/wq/kthread"
	"github.com/gowq/wq/wqhttp"
	"github.com/gowq/wq/wqtrace"
	"github.com/gowq/wq/wqtrace/analyze"
)

var _ = wq.Alloc
var _ = kthread.CreateWorker
var _ = wqhttp.Handler
var _ wqtrace.Tracer
var _ = analyze.Analyze

func main() {}
`)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("mod", "tidy"); err != nil {
		if strings.Contains(out, "GOPROXY=off") || strings.Contains(out, "dial tcp") || strings.Contains(out, "no such host") {
			t.Skipf("module proxy unreachable and the module cache lacks a dependency: %s", out)
		}
		t.Fatalf("go mod tidy in the scratch module: %v\n%s", err, out)
	}
	out, err := run("mod", "graph")
	if err != nil {
		t.Fatalf("go mod graph: %v\n%s", err, out)
	}
	if !strings.Contains(out, "github.com/gowq/wq") {
		t.Fatalf("graph does not list github.com/gowq/wq:\n%s", out)
	}
	for _, heavy := range []string{"gonum.org/v1/plot", "github.com/vbauerster/mpb", "github.com/spf13/cobra",
		"github.com/panjf2000/ants", "github.com/alitto/pond", "github.com/pierrec/lz4",
		"github.com/prometheus/client_golang", "github.com/chromedp"} {
		if strings.Contains(out, heavy) {
			t.Errorf("the library's module graph lists %s:\n%s", heavy, out)
		}
	}
}
