// Package browsertest starts a headless Chromium, driven through the
// DevTools protocol by github.com/chromedp/chromedp, for the commands'
// tests of the pages people look at: wqlab's HTML report and wqhttp's
// live page (/ui). It lives in the cmd module so that chromedp never
// enters the library's module graph.
//
// Tests skip, with the reason, when no browser is installed (CI installs
// the Debian package "chromium"; see .ci/run).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Names are the browser executables looked up on PATH, in order.
var Names = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"}

// Find returns the path of the first browser of Names found on PATH (or
// the one $GOWQ_CHROME names), or "" when there is none.
func Find() string {
	if p := os.Getenv("GOWQ_CHROME"); p != "" {
		if lp, err := exec.LookPath(p); err == nil {
			return lp
		}
	}
	for _, n := range Names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

// New starts a headless browser and returns a chromedp context for
// chromedp.Run and chromedp.Do, ending after timeout (start included);
// the browser is closed at the end of the test. It skips the test when
// no browser is found or when -short is set, and fails it when the browser
// does not start. The browser runs with --no-sandbox: Chromium refuses its
// sandbox as root, and these tests only load pages the test itself served
// or wrote.
func New(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	path := Find()
	if path == "" {
		t.Skip("no browser found: install Chromium (Debian: apt-get install chromium) or put one of chromium, " +
			"chromium-browser, google-chrome, headless_shell on PATH, or set GOWQ_CHROME")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1024),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	// The browser lives as long as the context of the first Run: start
	// it on ctx, with the deadline enforced by a timer rather than on ctx.
	deadline := time.AfterFunc(timeout, cancel)
	t.Cleanup(func() {
		deadline.Stop()
		cancel()  // closes the tab and the browser
		acancel() // waits for the browser process to exit
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}
