package main

import (
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gowq/wq/cmd/internal/browsertest"
	"github.com/gowq/wq/lab/scenario"
)

// plotMetricWord is the word each scenario's plot title must contain:
// the metric its verdict rests on.
var plotMetricWord = map[string]string{
	scenario.Verity:     "clat",
	scenario.Erofs:      "queue->start",
	scenario.Submit:     "queue->start",
	scenario.Delayed:    "queue->start",
	scenario.Throughput: "items/s",
}

// emptyPlaceholder matches text with a value left out: "seed )",
// "seed :", "()", a colon after a space.
var emptyPlaceholder = regexp.MustCompile(`\(\s*\)|\bseeds?\s*[:)]|\s:\s|\(seed\s*\)`)

// TestReportReadsItself reads the report in headless Chromium as a
// person would: every scenario section shows its verdict, every plot's
// title names the verdict's metric, a shaded row is explained by a
// legend, and no visible text has an empty placeholder (catches
// "Comparison with seed :" and "(seed )").
func TestReportReadsItself(t *testing.T) {
	dir, res := smallRun(t)
	ctx := browsertest.New(t, 30*time.Second)
	page := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "index.html")}).String()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("table.results"))); err != nil {
		t.Fatal(err)
	}
	type sectionView struct {
		Verdict   string `json:"verdict"`
		PlotTitle string `json:"plot_title"`
		Caption   string `json:"caption"`
		Shaded    int    `json:"shaded"`
		Legend    string `json:"legend"`
		PlotW     int    `json:"plot_w"`
		PageW     int    `json:"page_w"`
	}
	for _, name := range scenario.Names() {
		s := res.Scenario(name)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[sectionView](`(() => {
			const sec = document.getElementById("scenario-`+name+`");
			if (!sec) return {};
			const svg = sec.querySelector("figure svg"), vd = sec.querySelector("p.verdict");
			const texts = svg ? Array.from(svg.querySelectorAll("text")).map(t => t.textContent) : [];
			const lg = sec.querySelector("p.legend"), cap = sec.querySelector("figcaption");
			return {verdict: vd ? vd.innerText : "",
				plot_title: texts.find(x => x.startsWith("wqlab ")) || "",
				caption: cap ? cap.innerText : "",
				shaded: sec.querySelectorAll("tr.best-rt").length,
				legend: lg ? lg.innerText : "",
				plot_w: svg ? Math.round(svg.getBoundingClientRect().width) : 0,
				page_w: Math.round(sec.getBoundingClientRect().width)};
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.Verdict, "verdict (") || v.Verdict != s.Verdict.Text {
			t.Errorf("%s: verdict %q, want %q", name, v.Verdict, s.Verdict.Text)
		}
		if w := plotMetricWord[name]; !strings.Contains(v.PlotTitle, w) {
			t.Errorf("%s: plot title %q does not name the metric %q", name, v.PlotTitle, w)
		}
		if v.Caption == "" {
			t.Errorf("%s: plot without caption", name)
		}
		if v.Shaded > 0 && !strings.Contains(v.Legend, "Shaded") {
			t.Errorf("%s: %d shaded rows and no legend (%q)", name, v.Shaded, v.Legend)
		}
		if v.PlotW < v.PageW*9/10 {
			t.Errorf("%s: plot %d px wide on a %d px page", name, v.PlotW, v.PageW)
		}
	}
	// The first thing under the title is the answer to it, and every
	// table names its reference row.
	type pageView struct {
		Answer     string `json:"answer"`
		AfterTitle bool   `json:"after_title"`
		References int    `json:"references"`
	}
	pv, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](`(() => {
		const a = document.querySelector("p.answer"), h = document.querySelector("h1");
		return {answer: a ? a.innerText : "", after_title: !!(a && h && h.nextElementSibling === a),
			references: Array.from(document.querySelectorAll("section.scenario p.comparison")).filter(p => p.innerText.includes("reference: ")).length};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.ReplaceAll(pv.Answer, "\u00a0", " ") != res.Answer().Text || !pv.AfterTitle {
		t.Errorf("answer under the title %q (right after it: %v), want %q", pv.Answer, pv.AfterTitle, res.Answer().Text)
	}
	ran := 0
	for _, s := range res.Scenarios {
		if !s.Skipped {
			ran++
		}
	}
	if pv.References != ran {
		t.Errorf("%d tables name their reference row, want %d", pv.References, ran)
	}
	body, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const c = document.body.cloneNode(true);
		c.querySelectorAll("pre, svg").forEach(e => e.remove()); // printed text and plots are checked above
		return c.innerText;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(body, "\n") {
		if m := emptyPlaceholder.FindString(line); m != "" {
			t.Errorf("empty placeholder %q in %q", m, line)
		}
	}
	if !strings.Contains(body, scenario.SeedsExplained) {
		t.Error("the report does not say what a seed is")
	}
}
