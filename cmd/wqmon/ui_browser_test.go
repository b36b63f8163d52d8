package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gowq/wq/cmd/internal/browsertest"
)

// TestUIBrowser opens wqhttp's live page (/ui) in headless Chromium, as
// `wqmon` links it, for a queue that ran n items, and checks what the
// page's script rendered: the queue's monitor row with total n, its
// queue-to-start histogram with n samples across its buckets, and the
// pools with their workers.
func TestUIBrowser(t *testing.T) {
	const n = 37
	srv := serve(t, "wqmon_ui", n)
	ctx := browsertest.New(t, 30*time.Second)

	row := `#monitor tr[data-queue="wqmon_ui"]`
	err := chromedp.Do(ctx,
		chromedp.Navigate(uiURL(srv.URL+"/debug/wq")),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if err != nil {
		t.Fatal(err)
	}
	total, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+" td.total")))
	if err != nil {
		t.Fatal(err)
	}
	infl, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+" td.infl")))
	if err != nil {
		t.Fatal(err)
	}
	if total != fmt.Sprint(n) || infl != "0" {
		t.Errorf("monitor row: total %q infl %q, want %d and 0", total, infl, n)
	}

	// The histogram: its count, the samples of its bars, and how many
	// bars are drawn with a non-zero width.
	type histView struct {
		Count   int `json:"count"`
		Samples int `json:"samples"`
		Bars    int `json:"bars"`
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.hist[data-queue="wqmon_ui"]`))); err != nil {
		t.Fatal(err)
	}
	hist, err := chromedp.Run(ctx, chromedp.Evaluate[histView](`(() => {
		const h = document.querySelector('.hist[data-queue="wqmon_ui"]');
		let samples = 0, bars = 0;
		for (const tr of h.querySelectorAll("tr[data-samples]")) {
			samples += Number(tr.dataset.samples);
			if (tr.querySelector(".bar div").getBoundingClientRect().width > 0) bars++;
		}
		return {count: Number(h.dataset.count), samples, bars};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if hist.Count != n || hist.Samples != n || hist.Bars == 0 {
		t.Errorf("histogram: count %d, %d samples in its buckets, %d bars drawn; want %d, %d, > 0", hist.Count, hist.Samples, hist.Bars, n, n)
	}

	// The pools, with their workers: the queue's per-CPU pools have
	// workers, since it ran items.
	pools, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#pools tr.pool").length`))
	if err != nil {
		t.Fatal(err)
	}
	workers, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#pools tr.worker").length`))
	if err != nil {
		t.Fatal(err)
	}
	if pools == 0 || workers == 0 {
		t.Errorf("pools table: %d pools, %d workers; want some of each", pools, workers)
	}
}

// TestUIScopesTableRendered: the page's affinity-scope table has a row per
// scope with the scope's name, its pod count and its pods. Fault caught:
// the rows were built by stringifying cell elements, so every row read
// "[object HTMLTableCellElement]" three times.
func TestUIScopesTableRendered(t *testing.T) {
	srv := serve(t, "wqmon_scopes", 1)
	ctx := browsertest.New(t, 30*time.Second)
	row := `#scopes tr[data-scope="system"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(uiURL(srv.URL+"/debug/wq")),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#scopes tbody")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "[object") || !strings.Contains(text, "system") || !strings.Contains(text, "[0]=") {
		t.Errorf("scopes table reads %q; want scope names and pods, no [object ...]", text)
	}
}
