package wq_test

// TestDocsNameExistingIdentifiers keeps README.md and docs/ true to the
// code: every Go name written in backticks there must still be declared
// somewhere in the workspace, and every backticked file of the workspace
// (`park.go`, `lab/probe`) must still exist. Docs name code in backticks
// (`sched.GoLocked`, `wk.onSelf()`, `Stats().PWait`); when the code
// renames or removes a name, the doc must follow. decisions.md names what
// no longer exists without backticks (it is history); the dated logs in
// docs/results/ are left as written on their day and not checked.
//
// What counts as a Go name in a backticked span (outside fenced blocks),
// after argument lists are dropped (`q.Go(fn)` -> `q.Go()`):
//   - a selector chain (`wq.Alloc`, `p.mu.wake`, `Stats().PWait`): every
//     component after the first, and the first too when it is not a
//     local name (lowercase) of the docs' prose (`wk`, `q`, `p`); a chain
//     whose first component is a package from outside the workspace
//     (`runtime.LockOSThread`, `sync.Mutex`, `unix.Futex`) is skipped;
//   - a single name that is exported (`Workqueue`), camelCase
//     (`needMoreWorker`) or called (`kick()`).
//
// Not names: kernel and attribute names in snake_case (`max_active`),
// ALL-CAPS words (`PENDING`, `GOWQ_THREADS`), lowercase single words
// (`goro`, `local`), commands, flags and anything with a space.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docFiles are the documents TestDocsNameExistingIdentifiers checks,
// relative to the repository root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel == filepath.Join("docs", "results") {
			return filepath.SkipDir // dated logs, as written on their day
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// workspaceNames is what the Go files under root declare: package names,
// top-level functions, types, variables and constants, methods, struct
// fields and interface methods, and the names of the workspace's .go
// files and directories; ext is the set of package names the workspace
// imports from outside itself.
type workspaceNames struct {
	names map[string]bool
	files map[string]bool // base names of .go files
	pkgs  map[string]bool // the workspace's package names
	ext   map[string]bool
	// members are the fields and methods of each struct type by name;
	// embeds its embedded types; opaque the types that are not structs.
	members map[string]map[string]bool
	embeds  map[string][]string
	opaque  map[string]bool
}

func collectNames(t *testing.T, root string) *workspaceNames {
	t.Helper()
	ws := &workspaceNames{names: map[string]bool{}, files: map[string]bool{}, pkgs: map[string]bool{}, ext: map[string]bool{},
		members: map[string]map[string]bool{}, embeds: map[string][]string{}, opaque: map[string]bool{}}
	imports := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		ws.files[name] = true
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ws.names[f.Name.Name] = true
		ws.pkgs[strings.TrimSuffix(f.Name.Name, "_test")] = true
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			imports[p] = true
			if im.Name != nil {
				ws.ext[im.Name.Name] = true // a renamed import is prose's name for it
			}
		}
		ws.addDecls(f, true)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	goroot := runtime.GOROOT()
	for p := range imports {
		if strings.HasPrefix(p, "github.com/gowq/wq") {
			continue
		}
		if !strings.Contains(strings.Split(p, "/")[0], ".") && p != "C" {
			ws.addStd(t, fset, filepath.Join(goroot, "src", p))
		}
		parts := strings.Split(p, "/")
		last := parts[len(parts)-1]
		if len(parts) > 1 && regexp.MustCompile(`^v[0-9]+$`).MatchString(last) {
			last = parts[len(parts)-2]
		}
		last = strings.TrimSuffix(strings.TrimPrefix(last, "go-"), ".go")
		ws.ext[last] = true
	}
	// Packages the docs compare gowq with, which the workspace does not
	// import under these names.
	for _, p := range []string{"errgroup", "conc", "pool", "workqueue", "runtime", "sync", "atomic", "os", "syscall"} {
		ws.ext[p] = true
	}
	for _, n := range peerNames {
		ws.names[n] = true
	}
	return ws
}

// peerNames are names of the libraries go-users.md and kernel-api.md map
// to gowq (ants, pond, conc, errgroup, client-go's workqueue), which the
// docs write in backticks as those libraries spell them.
var peerNames = []string{
	// ants
	"ErrPoolOverload", "WithNonblocking", "WithMaxBlockingTasks", "ReleaseTimeout", "Waiting",
	// pond
	"TrySubmit", "WithQueueSize", "StopAndWait", "WaitingTasks", "NewGroupContext",
	// conc
	"ErrPanic", "WithErrors", "WithContext", "WithCancelOnError", "WithFirstError",
	// client-go's workqueue
	"Get", "AddAfter", "AddRateLimited", "ShutDown", "ShutDownWithDrain",
}

// addStd adds the names a standard library package declares (unexported
// ones too: the docs name runtime internals such as entersyscallblock).
func (ws *workspaceNames) addStd(t *testing.T, fset *token.FileSet, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // not a directory of GOROOT (a pseudo-package such as unsafe has one)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ws.addDecls(f, false)
	}
}

// addDecls adds the names f declares, and the members (fields and
// methods) of the types it declares.
func (ws *workspaceNames) addDecls(f *ast.File, ours bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			ws.names[n.Name.Name] = true
			if ours && n.Recv != nil && len(n.Recv.List) == 1 {
				ws.addMember(embeddedName(n.Recv.List[0].Type), n.Name.Name)
			}
		case *ast.TypeSpec:
			ws.names[n.Name.Name] = true
			if st, ok := n.Type.(*ast.StructType); !ours {
			} else if ok {
				for _, fl := range st.Fields.List {
					for _, id := range fl.Names {
						ws.addMember(n.Name.Name, id.Name)
					}
					if len(fl.Names) == 0 {
						e := embeddedName(fl.Type)
						ws.addMember(n.Name.Name, e)
						ws.embeds[n.Name.Name] = append(ws.embeds[n.Name.Name], e)
					}
				}
			} else {
				ws.opaque[n.Name.Name] = true // members not listed here (defined on another type, an interface)
			}
		case *ast.ValueSpec:
			for _, id := range n.Names {
				ws.names[id.Name] = true
			}
		case *ast.Field:
			for _, id := range n.Names {
				ws.names[id.Name] = true
			}
			if len(n.Names) == 0 { // embedded: its type's name is the field's
				ws.names[embeddedName(n.Type)] = true
			}
		}
		return true
	})
}

func (ws *workspaceNames) addMember(typ, name string) {
	if ws.members[typ] == nil {
		ws.members[typ] = map[string]bool{}
	}
	ws.members[typ][name] = true
}

// hasMember reports whether type typ (any type of that name in the
// workspace) has a field or method name, directly or through an embedded
// field; true when typ is not a struct declared in the workspace.
func (ws *workspaceNames) hasMember(typ, name string, seen map[string]bool) bool {
	if ws.members[typ] == nil || ws.opaque[typ] || seen[typ] {
		return ws.members[typ] == nil || ws.opaque[typ]
	}
	seen[typ] = true
	if ws.members[typ][name] {
		return true
	}
	for _, e := range ws.embeds[typ] {
		if ws.members[e] != nil && ws.hasMember(e, name, seen) {
			return true
		}
	}
	return false
}

// receivers are the variable names the docs use for gowq's internal
// types, as the code does (wk.onSelf(), p.mu, pq.pool). Not q and w: the
// docs also name other libraries' queues and items so (q.AddAfter).
var receivers = map[string]string{"wk": "worker", "p": "pool", "pq": "pwq"}

func embeddedName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return embeddedName(e.X)
	case *ast.IndexListExpr:
		return embeddedName(e.X)
	}
	return ""
}

var (
	backtickSpan = regexp.MustCompile("`([^`\n]+)`")
	argList      = regexp.MustCompile(`\([^()]*\)`)
	goChain      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\(\))?(\.[A-Za-z_][A-Za-z0-9_]*(\(\))?)*$`)
	allCaps      = regexp.MustCompile(`^[A-Z0-9_]+$`)
	camel        = regexp.MustCompile(`^[a-z][a-z0-9]*[A-Z]`)
	docFile      = regexp.MustCompile(`^[A-Za-z0-9_./-]+\.(md|py|json|html|txt|svg|sh|service|yaml|yml|mod|work|sum|c|h|tmpl|img)$`)
	pathName     = regexp.MustCompile(`^((?:internal|lab|cmd|kthread|wqtrace|wqhttp|metrics)(?:/[A-Za-z0-9_]+)*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?$`)
	repoPath     = regexp.MustCompile(`^(internal|lab|cmd|kthread|wqtrace|wqhttp|metrics|docs)/[A-Za-z0-9_./-]*$`)
)

// staleName is a backticked name of a document that the workspace does
// not declare.
type staleName struct {
	file string
	line int
	span string
	name string
}

// checkDoc returns the stale names of one document's text.
func (ws *workspaceNames) checkDoc(root, file, text string) []staleName {
	var out []staleName
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range backtickSpan.FindAllStringSubmatch(line, -1) {
			for _, name := range ws.missing(root, m[1]) {
				out = append(out, staleName{file, i + 1, m[1], name})
			}
		}
	}
	return out
}

// missing returns the names of span that the workspace does not declare.
func (ws *workspaceNames) missing(root, span string) []string {
	span = strings.TrimSpace(span)
	if strings.HasPrefix(span, "_") || strings.ContainsAny(span, "*") || docFile.MatchString(span) {
		return nil // a pattern of names, or a file that is not Go
	}
	if m := pathName.FindStringSubmatch(span); m != nil && m[2] != "go" { // internal/sched.GoLocked
		var miss []string
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			miss = append(miss, m[1])
		}
		if !ws.names[m[2]] {
			miss = append(miss, m[2])
		}
		return miss
	}
	if repoPath.MatchString(span) {
		p := strings.TrimSuffix(strings.TrimSuffix(span, "..."), "/")
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return []string{p}
		}
		return nil
	}
	if strings.HasSuffix(span, ".go") && !strings.ContainsAny(span, " /") {
		if !ws.files[span] {
			return []string{span}
		}
		return nil
	}
	for {
		s := argList.ReplaceAllString(span, "()")
		if s == span {
			break
		}
		span = s
	}
	if !goChain.MatchString(span) {
		return nil
	}
	parts := strings.Split(span, ".")
	for i := range parts {
		parts[i] = strings.TrimSuffix(parts[i], "()")
	}
	var check []string
	if len(parts) == 1 {
		p := parts[0]
		switch {
		case allCaps.MatchString(p), strings.Contains(p, "_") && strings.ToLower(p) == p:
		case p[0] >= 'A' && p[0] <= 'Z', camel.MatchString(p):
			check = append(check, p)
		}
	} else {
		first := parts[0]
		if ws.ext[first] && !ws.pkgs[first] {
			return nil // another package's name (runtime.LockOSThread)
		}
		if first[0] >= 'A' && first[0] <= 'Z' {
			check = append(check, first)
		}
		for _, p := range parts[1:] {
			if allCaps.MatchString(p) || (strings.Contains(p, "_") && strings.ToLower(p) == p) {
				continue
			}
			check = append(check, p)
		}
	}
	var miss []string
	for _, n := range check {
		if !ws.names[n] {
			miss = append(miss, n)
		}
	}
	if len(parts) > 1 && len(miss) == 0 {
		// wk.park(), Work.inPwq: the member must be the type's.
		typ := receivers[parts[0]]
		if typ == "" && ws.members[parts[0]] != nil && !ws.pkgs[parts[0]] && !strings.HasSuffix(span[:len(parts[0])+min(2, len(span)-len(parts[0]))], "()") {
			typ = parts[0]
		}
		if typ != "" && !ws.hasMember(typ, parts[1], map[string]bool{}) {
			miss = append(miss, typ+"."+parts[1])
		}
	}
	return miss
}

func TestDocsNameExistingIdentifiers(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	ws := collectNames(t, root)
	// The checker itself must see a name that no longer exists, a stale
	// file and a stale receiver chain, and let real ones pass.
	probe := "`wq.Alloc`, `sched.GoLocked`, `Stats().PWait`, `q.Go(fn)`, `runtime.Gosched()`, `max_active`, `PENDING`\n" +
		"`wk.parkNoSuchThing()`, `noSuchFile.go`, `NoSuchType`, `lab/nosuchdir`, `wk.Flush()`, `Work.Flush`, `Work.onSelf`\n```\n`InFence`\n```\n"
	var got []string
	for _, s := range ws.checkDoc(root, "probe", probe) {
		got = append(got, s.name)
	}
	if want := "parkNoSuchThing noSuchFile.go NoSuchType lab/nosuchdir worker.Flush Work.onSelf"; strings.Join(got, " ") != want {
		t.Fatalf("checker found %q in its probe, want %q", strings.Join(got, " "), want)
	}
	var stale []string
	for _, f := range docFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ws.checkDoc(root, f, string(b)) {
			stale = append(stale, f+":"+strconv.Itoa(s.line)+": `"+s.span+"` names "+s.name+", which the workspace does not declare")
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		t.Error(s)
	}
	if len(stale) > 0 {
		t.Log("rename the name in the doc, or write a name of the past without backticks (decisions.md)")
	}
}

// TestDocsStateWhatIsTrueNow keeps the project's history out of the
// documents that state what is true now: no "issue N", "session" or
// "round N" in README.md, design.md, HACKING.md, go-users.md or
// kernel-api.md. History goes in decisions.md, figures of past runs in
// docs/results/.
func TestDocsStateWhatIsTrueNow(t *testing.T) {
	history := regexp.MustCompile(`(?i)\bissue\s+#?[0-9]+|\bsessions?\b|\bround\s+[0-9]+`)
	if !history.MatchString("as issue 14 found") || !history.MatchString("in the second Session") || !history.MatchString("round 4") || history.MatchString("8 rounds of 300ms slices") {
		t.Fatal("the history pattern does not match what it must")
	}
	for _, f := range []string{"README.md", "docs/design.md", "docs/HACKING.md", "docs/go-users.md", "docs/kernel-api.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: history belongs in docs/decisions.md (or docs/results/ for figures)", f, i+1, m)
			}
		}
	}
}

// testVariants are the suffixes a test file may add to its twin's name:
// x_internal_test.go (package wq), x_norace_test.go and x_unix_test.go
// (build constraints) all test x.go.
var testVariants = []string{"_internal", "_norace", "_unix"}

// twinOf is the source file a test file mirrors: x.go for x_test.go and
// its variants.
func twinOf(test string) string {
	x := strings.TrimSuffix(test, "_test.go")
	for _, v := range testVariants {
		if s, ok := strings.CutSuffix(x, v); ok {
			x = s
			break
		}
	}
	return x + ".go"
}

// layoutSuites reads the test files without a twin that HACKING.md
// lists: the items of the list that follows the paragraph naming
// TestTestFilesMirrorSources, each starting with one or more backticked
// file names (glob patterns allowed) before a colon.
func layoutSuites(hacking string) []string {
	var suites []string
	in := false
	for line := range strings.Lines(hacking) {
		line = strings.TrimRight(line, "\n")
		if !in {
			in = strings.Contains(line, "`TestTestFilesMirrorSources`")
			continue
		}
		item, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "- ")
		if !ok {
			if len(suites) > 0 && !strings.HasPrefix(line, "    ") {
				break // the list ended
			}
			continue
		}
		head, _, _ := strings.Cut(item, ":")
		for _, m := range regexp.MustCompile("`([^`]+_test\\.go)`").FindAllStringSubmatch(head, -1) {
			suites = append(suites, m[1])
		}
	}
	return suites
}

// strayTestFiles returns, of the test files tests, those that have no
// twin among sources and are not suites, and the suites that match no
// test file or that have a twin (they would be listed for nothing).
func strayTestFiles(tests []string, sources map[string]bool, suites []string) []string {
	var bad []string
	used := make([]bool, len(suites))
	for _, f := range tests {
		suite := false
		for i, s := range suites {
			if ok, _ := filepath.Match(s, f); ok {
				suite, used[i] = true, true
			}
		}
		twin := sources[twinOf(f)]
		switch {
		case suite && twin:
			bad = append(bad, f+": listed as a suite in HACKING.md, but it has a twin, "+twinOf(f))
		case !suite && !twin:
			bad = append(bad, f+": no "+twinOf(f)+" to mirror, and not a suite listed in HACKING.md")
		}
	}
	for i, s := range suites {
		if !used[i] {
			bad = append(bad, s+": listed as a suite in HACKING.md, but no such test file")
		}
	}
	return bad
}

// TestTestFilesMirrorSources keeps the root package's test files
// mirroring its source files (HACKING.md, "Tests"): every x_test.go (and
// x_internal_test.go, x_norace_test.go, x_unix_test.go) has its x.go,
// except the cross-cutting suites that HACKING.md lists, read from there
// so that the doc and the check cannot drift.
func TestTestFilesMirrorSources(t *testing.T) {
	b, err := os.ReadFile("docs/HACKING.md")
	if err != nil {
		t.Fatal(err)
	}
	suites := layoutSuites(string(b))
	if len(suites) == 0 {
		t.Fatal("HACKING.md lists no test suites after the paragraph naming TestTestFilesMirrorSources")
	}
	// The checker must flag a stray file, a suite with a twin and a
	// listed suite that does not exist, and let twins and suites pass.
	probe := strayTestFiles(
		[]string{"pool_test.go", "pool_internal_test.go", "cm_unix_test.go", "example_x_test.go", "stray_test.go", "pool_norace_test.go", "twin_test.go"},
		map[string]bool{"pool.go": true, "cm.go": true, "twin.go": true},
		[]string{"example_*_test.go", "twin_test.go", "gone_test.go"})
	want := []string{
		"stray_test.go: no stray.go to mirror, and not a suite listed in HACKING.md",
		"twin_test.go: listed as a suite in HACKING.md, but it has a twin, twin.go",
		"gone_test.go: listed as a suite in HACKING.md, but no such test file",
	}
	if !slices.Equal(probe, want) {
		t.Fatalf("checker found %q in its probe, want %q", probe, want)
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	sources := map[string]bool{}
	for _, e := range entries {
		switch n := e.Name(); {
		case e.IsDir():
		case strings.HasSuffix(n, "_test.go"):
			tests = append(tests, n)
		case strings.HasSuffix(n, ".go"):
			sources[n] = true
		}
	}
	for _, s := range strayTestFiles(tests, sources, suites) {
		t.Error(s)
	}
	if t.Failed() {
		t.Log("move each test to the test file of the source file that defines what it tests, or list a new cross-cutting suite in HACKING.md, \"Tests\"")
	}
}
