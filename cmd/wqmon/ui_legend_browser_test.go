package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gowq/wq/cmd/internal/browsertest"
)

// TestUIFirstRenderExplained opens the live page in headless Chromium and
// reads its first render as a person would: items/s has a figure already
// (not "-" until the second refresh), every column header has a tooltip,
// and the legend explains the columns a newcomer asks about.
func TestUIFirstRenderExplained(t *testing.T) {
	srv := serve(t, "wqmon_legend", 5)
	ctx := browsertest.New(t, 30*time.Second)
	row := `#monitor tr[data-queue="wqmon_legend"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(uiURL(srv.URL+"/debug/wq")),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatal(err)
	}
	type view struct {
		Rate     string   `json:"rate"`
		Untitled []string `json:"untitled"`
		Headers  int      `json:"headers"`
		Legend   string   `json:"legend"`
	}
	v, err := chromedp.Run(ctx, chromedp.Evaluate[view](`(() => {
		const ths = [...document.querySelectorAll("#monitor th, #pools th")].filter(th => th.closest("thead"));
		return {
			rate: document.querySelector('`+row+` td.rate').textContent,
			untitled: ths.filter(th => !th.title).map(th => th.textContent),
			headers: ths.length,
			legend: [...document.querySelectorAll("dl.legend")].map(dl => dl.innerText).join("\n"),
		};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if v.Rate == "-" || v.Rate == "" {
		t.Errorf("items/s on the first render is %q, want a figure", v.Rate)
	}
	if v.Headers < 20 || len(v.Untitled) > 0 {
		t.Errorf("%d column headers, these without a tooltip: %q", v.Headers, v.Untitled)
	}
	for _, col := range []string{"CPUitsv", "CMW/RPR", "mayday", "rescued", "ESC", "items/s", "idle", "pending"} {
		if !strings.Contains(v.Legend, ": "+col) {
			t.Errorf("legend does not explain %q:\n%s", col, v.Legend)
		}
	}
}
