package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/gowq/wq/cmd/internal/browsertest"
	"github.com/gowq/wq/lab/scenario"
)

// smallRun runs every scenario briefly (100 ms of measurement each, three
// configurations, no antagonist, a 1 MiB verity image: about a second)
// and returns the output directory.
func smallRun(t *testing.T) (dir string, res *scenario.Results) {
	t.Helper()
	dir = t.TempDir()
	code, stdout, stderr := run(t, "--quick", "--duration", "100ms", "--antagonist", "none", "--verity-mib", "1",
		"--configs", "normal-percpu,rt-percpu,go", "--no-progress", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "index.html") {
		t.Errorf("stdout does not name the report:\n%s", stdout)
	}
	return dir, readResults(t, filepath.Join(dir, "results.json"))
}

// TestReportBrowser opens wqlab-results/index.html of a real (small) run
// from disk in headless Chromium and checks that it shows the four
// scenario tables, each with one row per configuration of results.json,
// its verdict and its plot drawn inline.
func TestReportBrowser(t *testing.T) {
	dir, res := smallRun(t)
	ctx := browsertest.New(t, 30*time.Second)
	page := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "index.html")}).String()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("table.results"))); err != nil {
		t.Fatal(err)
	}
	type tableView struct {
		Rows    int    `json:"rows"`
		Visible bool   `json:"visible"`
		Verdict string `json:"verdict"`
		PlotW   int    `json:"plot_w"` // drawn width of the inline SVG plot, px
	}
	for _, name := range scenario.Names() {
		s := res.Scenario(name)
		if s == nil || s.Skipped {
			t.Fatalf("scenario %s not in the results or skipped: %+v", name, s)
		}
		v, err := chromedp.Run(ctx, chromedp.Evaluate[tableView](`(() => {
			const tb = document.querySelector('table.results[data-scenario="`+name+`"]');
			if (!tb) return {rows: -1};
			const sec = document.getElementById("scenario-`+name+`");
			const r = tb.getBoundingClientRect(), svg = sec.querySelector("figure svg");
			return {rows: tb.tBodies[0].rows.length, visible: r.width > 0 && r.height > 0,
				verdict: sec.querySelector("p.verdict").innerText,
				plot_w: svg ? Math.round(svg.getBoundingClientRect().width) : 0};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if v.Rows != len(s.Rows) || !v.Visible {
			t.Errorf("%s: table with %d rows (visible %v), want %d visible rows", name, v.Rows, v.Visible, len(s.Rows))
		}
		if v.Verdict != s.Verdict.Text {
			t.Errorf("%s: verdict %q, want %q", name, v.Verdict, s.Verdict.Text)
		}
		if v.PlotW < 100 {
			t.Errorf("%s: inline plot %d px wide", name, v.PlotW)
		}
	}
	// The page loaded nothing else: one resource, the page itself.
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the report loaded %d other resources", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.txt")); err != nil {
		t.Error(err)
	}
}

// TestReportHTML checks the same report without a browser: it parses
// index.html and finds the four scenario tables, each with one row per
// configuration, and one inline SVG plot per scenario.
func TestReportHTML(t *testing.T) {
	dir, res := smallRun(t)
	f, err := os.Open(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int{}
	svgs := 0
	var walk func(n *html.Node, table string)
	walk = func(n *html.Node, table string) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "table":
				table = ""
				for _, a := range n.Attr {
					if a.Key == "data-scenario" {
						table = a.Val
					}
				}
			case "tr":
				if table != "" && n.Parent != nil && n.Parent.Data == "tbody" {
					rows[table]++
				}
			case "svg":
				svgs++
			case "script", "link", "img", "iframe":
				t.Errorf("report has a <%s> element", n.Data)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, table)
		}
	}
	walk(doc, "")
	for _, name := range scenario.Names() {
		if want := len(res.Scenario(name).Rows); rows[name] != want {
			t.Errorf("%s: %d table rows, want %d", name, rows[name], want)
		}
	}
	if svgs != len(scenario.Names()) {
		t.Errorf("%d inline plots, want %d", svgs, len(scenario.Names()))
	}
}
