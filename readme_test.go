package wq_test

// Every ```go block of README.md is compiled by TestReadmeGoBlocksCompile,
// so that the README's code cannot drift from the API. A block is one of:
//
//   - a copy of an Example: the line before the block is
//     <!-- example: Example_name -->, and the block's text must equal the
//     body of that Example function (in any _test.go file of the
//     repository), de-indented by one tab, without its "// Output:"
//     comment. go test compiles the Example (and runs it if it has an
//     output comment), so the block compiles with it. Use this form for
//     code that calls helpers of its own (verify, handle...) or needs
//     privileges to run.
//   - a whole file: the block starts with "package"; it is built as one
//     package of a scratch module.
//   - a fragment, any other block: it is built as the body of
//     `func() error { <block>; return nil }`, or as top-level declarations
//     when it only parses as such, in a scratch package that imports, for
//     each package name the block uses, the gowq package (wq, kthread,
//     wqhttp, wqtrace, analyze, wqfallback, metrics) or the standard
//     library package (readmeImports) of that name. A fragment must compile
//     as it stands: no "...", no undeclared helpers.
//
// The scratch module is built in a temporary directory in a go.work that
// uses it and this repository's modules, so the blocks build against this
// checkout, with no module download. Compile errors name README.md lines.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// readmeBlock is one ```go block of README.md.
type readmeBlock struct {
	line    int    // README line of the block's first code line
	text    string // the code, without the fences
	example string // Example function named by the marker before it, or ""
}

var exampleMarker = regexp.MustCompile(`^<!--\s*example:\s*(Example\w*)\s*-->$`)

// readmeGoBlocks returns the ```go blocks of the markdown text md.
func readmeGoBlocks(md string) ([]readmeBlock, error) {
	lines := strings.Split(md, "\n")
	var blocks []readmeBlock
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		b := readmeBlock{line: i + 2}
		for j := i - 1; j >= 0; j-- {
			if s := strings.TrimSpace(lines[j]); s != "" {
				if m := exampleMarker.FindStringSubmatch(s); m != nil {
					b.example = m[1]
				}
				break
			}
		}
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				end = j
				break
			}
		}
		if end < 0 {
			return nil, fmt.Errorf("README.md:%d: ```go block without a closing fence", i+1)
		}
		b.text = strings.Join(lines[i+1:end], "\n")
		blocks = append(blocks, b)
		i = end
	}
	return blocks, nil
}

// readmeImports maps the package names a fragment may use to their import
// paths.
var readmeImports = map[string]string{
	"wq":         "github.com/gowq/wq",
	"kthread":    "github.com/gowq/wq/kthread",
	"wqfallback": "github.com/gowq/wq/kthread/wqfallback",
	"wqhttp":     "github.com/gowq/wq/wqhttp",
	"wqtrace":    "github.com/gowq/wq/wqtrace",
	"analyze":    "github.com/gowq/wq/wqtrace/analyze",
	"metrics":    "github.com/gowq/wq/metrics",
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"io":         "io",
	"log":        "log",
	"slog":       "log/slog",
	"http":       "net/http",
	"os":         "os",
	"runtime":    "runtime",
	"strings":    "strings",
	"sync":       "sync",
	"atomic":     "sync/atomic",
	"time":       "time",
}

// fragmentFile returns the Go file for fragment b, named package p.
func fragmentFile(p string, b readmeBlock) string {
	used := map[string]bool{}
	// Parse leniently (as declarations, then as a function body) to find
	// the names used as X.Sel that are package names of readmeImports.
	for _, src := range []string{"package p\n" + b.text, "package p\nfunc _() {\n" + b.text + "\n}"} {
		f, _ := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
		if f == nil {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && readmeImports[id.Name] != "" {
					used[id.Name] = true
				}
			}
			return true
		})
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	var h strings.Builder
	fmt.Fprintf(&h, "package %s\n\nimport (\n", p)
	for _, n := range names {
		fmt.Fprintf(&h, "\t%s %q\n", n, readmeImports[n])
	}
	h.WriteString(")\n\n")
	at := fmt.Sprintf("//line README.md:%d\n", b.line)
	decls := h.String() + at + b.text + "\n"
	if _, err := parser.ParseFile(token.NewFileSet(), "", decls, 0); err == nil {
		return decls
	}
	return h.String() + "var _ = func() error {\n" + at + b.text + "\n\treturn nil\n}\n"
}

// exampleBodies returns the body of every Example function in the
// repository's _test.go files, de-indented by one tab and without the
// output comment, by function name.
func exampleBodies(root string) (map[string]string, error) {
	bodies := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			var out []string
			for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
				t := strings.TrimSpace(l)
				if t == "// Output:" || t == "// Unordered output:" {
					break
				}
				out = append(out, strings.TrimPrefix(l, "\t"))
			}
			bodies[fn.Name.Name] = strings.TrimRight(strings.Join(out, "\n"), "\n")
		}
		return nil
	})
	return bodies, err
}

// TestReadmeGoBlocksCompile catches README code that does not compile
// against this checkout (a q.Queue(r) where Queue takes *wq.Work), and a
// README copy of an Example that no longer matches it.
func TestReadmeGoBlocksCompile(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkReadme(t, string(md)) {
		t.Error(p)
	}
}

// TestReadmeCheckerRejects catches a checker that passes whatever it is
// given: each block kind, broken, must be reported, and fixed, must pass.
func TestReadmeCheckerRejects(t *testing.T) {
	fence := "```"
	for _, c := range []struct {
		name, md string
		bad      bool
	}{
		{"fragment ok", fence + "go\nq, err := wq.Alloc(\"x\", wq.Unbound, 0)\nif err != nil {\n\treturn err\n}\ndefer q.Destroy()\nvar w wq.Work\nw.Init(func() { fmt.Println(time.Now()) })\nq.Queue(&w)\n" + fence + "\n", false},
		{"fragment wrong type", fence + "go\nq, _ := wq.Alloc(\"x\", wq.Unbound, 0)\ntype request struct{ wq.Work }\nr := &request{}\nq.Queue(r)\n" + fence + "\n", true},
		{"fragment elision", fence + "go\nq, err := wq.Alloc(\"x\", wq.Unbound, 0)\nif err != nil { ... }\n_ = q\n" + fence + "\n", true},
		{"declarations ok", fence + "go\ntype request struct{ wq.Work }\n\nfunc (r *request) run() {}\n" + fence + "\n", false},
		{"file ok", fence + "go\npackage main\n\nimport \"github.com/gowq/wq\"\n\nfunc main() { _ = wq.Unbound }\n" + fence + "\n", false},
		{"file broken", fence + "go\npackage main\n\nfunc main() { undefinedHelper() }\n" + fence + "\n", true},
		{"example copy ok", "<!-- example: Example_readmeUse -->\n" + fence + "go\n" + readmeUseBody(t) + "\n" + fence + "\n", false},
		{"example copy stale", "<!-- example: Example_readmeUse -->\n" + fence + "go\nq.Queue(r)\n" + fence + "\n", true},
		{"example missing", "<!-- example: ExampleNoSuchThing -->\n" + fence + "go\nx := 1\n_ = x\n" + fence + "\n", true},
		{"several ok", fence + "go\npackage main\n\nfunc main() {}\n" + fence + "\n\n" + fence + "go\npackage main\n\nfunc main() {}\n" + fence + "\n" + fence + "go\nx := 1\n_ = x\n" + fence + "\n", false},
		{"several, the last broken", fence + "go\nx := 1\n_ = x\n" + fence + "\n" + fence + "go\npackage main\n\nfunc main() { nope() }\n" + fence + "\n", true},
	} {
		problems := checkReadme(t, c.md)
		if got := len(problems) > 0; got != c.bad {
			t.Errorf("%s: problems %q, want bad=%v", c.name, problems, c.bad)
		}
	}
}

// readmeUseBody returns the body of Example_readmeUse as the README shows it.
func readmeUseBody(t *testing.T) string {
	t.Helper()
	bodies, err := exampleBodies(".")
	if err != nil {
		t.Fatal(err)
	}
	return bodies["Example_readmeUse"]
}

// checkReadme returns what is wrong with the ```go blocks of the markdown
// md: blocks that do not compile, copies that differ from their Example.
// It skips t where the go command cannot run.
func checkReadme(t *testing.T, md string) []string {
	t.Helper()
	blocks, err := readmeGoBlocks(md)
	if err != nil {
		return []string{err.Error()}
	}
	if len(blocks) == 0 {
		return []string{"README.md has no ```go block: the parser or the README changed"}
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	var examples map[string]string
	dir := t.TempDir()
	var builds int
	for i, b := range blocks {
		p := fmt.Sprintf("block%d", i+1)
		switch {
		case b.example != "":
			if examples == nil {
				if examples, err = exampleBodies(root); err != nil {
					t.Fatal(err)
				}
			}
			body, ok := examples[b.example]
			if !ok {
				problems = append(problems, fmt.Sprintf("README.md:%d: the block copies %s, which no _test.go file declares", b.line, b.example))
			} else if strings.TrimRight(b.text, "\n") != body {
				problems = append(problems, fmt.Sprintf("README.md:%d: the block differs from the body of %s; copy it again:\n--- README\n%s\n--- %s\n%s",
					b.line, b.example, b.text, b.example, body))
			}
			continue
		case strings.HasPrefix(strings.TrimSpace(b.text), "package "):
			src := fmt.Sprintf("//line README.md:%d\n%s\n", b.line, b.text)
			writeFile(t, filepath.Join(dir, p, "block.go"), src)
		default:
			writeFile(t, filepath.Join(dir, p, "block.go"), fragmentFile(p, b))
		}
		builds++
	}
	if builds == 0 {
		return problems
	}
	goBin, env := goTool(t)
	writeFile(t, filepath.Join(dir, "go.mod"), "module readme\n\ngo 1.26.0\n")
	writeFile(t, filepath.Join(dir, "go.work"), fmt.Sprintf("go 1.26.0\n\nuse (\n\t.\n\t%q\n\t%q\n)\n",
		root, filepath.Join(root, "metrics")))
	// The workspace's checksums, so that the build needs no download.
	var sums strings.Builder
	for _, sum := range []string{"go.work.sum", "go.sum", "metrics/go.sum"} {
		if b, err := os.ReadFile(filepath.Join(root, sum)); err == nil {
			sums.Write(b)
		}
	}
	writeFile(t, filepath.Join(dir, "go.work.sum"), sums.String())
	// Each block is its own package: a main package's blocks link, the
	// others compile.
	cmd := exec.Command(goBin, "build", "-o", os.DevNull, "./...")
	cmd.Dir = dir
	cmd.Env = append(env, "GOWORK="+filepath.Join(dir, "go.work"))
	if out, err := cmd.CombinedOutput(); err != nil {
		problems = append(problems, fmt.Sprintf("the Go blocks do not compile (see the convention at the top of readme_test.go): %v\n%s", err, out))
	}
	return problems
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
