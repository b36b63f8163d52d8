// Command wqmon monitors the workqueues of a running gowq program live, as
// the kernel's tools/workqueue/wq_monitor.py does for the kernel's.
//
// Usage:
//
//	wqmon [-i SECS] [-j] [-c] [-n N] URL [REGEX...]
//	wqmon -demo [-i SECS] [-j] [-c] [-n N] [REGEX...]
//
// URL is where the program mounted wqhttp.Handler (for example
// http://127.0.0.1:6060/debug/wq); wqmon polls URL/monitor?format=json
// every interval and prints the wq_monitor.py table:
//
//	                            total  infl  CPUtime CPUitsv CMW/RPR  mayday rescued     ESC
//	demo_percpu                   412     1      0.1       0      97       -       -       -
//
// Before the first table wqmon prints on stderr what each column means
// (total, infl, CPUtime, CPUitsv, CMW/RPR, mayday, rescued, ESC; the same
// text as the live page's tooltips and legend).
//
// By default each table shows what happened during the last interval (the
// counters' deltas since the previous sample; infl is the current number
// in flight), the first one the totals so far. -c prints the totals since
// each queue was allocated instead, which is what wq_monitor.py prints.
// REGEX arguments keep the workqueues whose name matches any of them.
//
// wqmon also prints, on stderr, the URL of the program's live page
// (URL/ui, served by wqhttp): open it in a browser for the same table
// refreshed every second, each queue's queue-to-start histogram and the
// pools with their workers. With -demo it is the demo's page:
//
//	wqmon: live page: http://127.0.0.1:40123/debug/wq/ui
//
// Flags:
//
//	-i SECS  interval between samples, in seconds (default 1; 0 prints once and exits)
//	-j       print JSON lines instead, one object per workqueue per sample, with the
//	         totals and a "timestamp" (wq_monitor.py -j)
//	-c       cumulative: print totals instead of per-interval deltas
//	-n N     stop after N samples (0, the default: until interrupted)
//	-demo    start an in-process demo workload and a wqhttp handler on
//	         127.0.0.1 (its URL and live page are printed on stderr) and
//	         monitor it
//
// wqmon exits 0 after N samples or on SIGINT/SIGTERM, 1 when the first
// sample cannot be fetched, 2 on bad usage. Later fetch errors are printed
// on stderr and the monitor keeps polling.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/gowq/wq/wqhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	base       string // URL of the handler, without /monitor
	filter     string // REGEX arguments joined with |, "" for all
	interval   time.Duration
	jsonLines  bool
	cumulative bool
	samples    int
	demo       bool
}

func parseArgs(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("wqmon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: wqmon [-i SECS] [-j] [-c] [-n N] URL [REGEX...]\n       wqmon -demo [flags] [REGEX...]\n\nURL is where wqhttp.Handler is mounted, e.g. http://127.0.0.1:6060/debug/wq\n\n")
		fs.PrintDefaults()
	}
	var c config
	secs := fs.Float64("i", 1, "interval between samples in `seconds` (0: print once and exit)")
	fs.BoolVar(&c.jsonLines, "j", false, "print JSON lines (one object per workqueue per sample, totals)")
	fs.BoolVar(&c.cumulative, "c", false, "print totals since allocation (as wq_monitor.py) instead of per-interval deltas")
	fs.IntVar(&c.samples, "n", 0, "stop after `N` samples (0: until interrupted)")
	fs.BoolVar(&c.demo, "demo", false, "start an in-process demo workload and handler on 127.0.0.1 and monitor it")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if math.IsNaN(*secs) || *secs < 0 || *secs > 86400 {
		return c, fmt.Errorf("-i %v: want 0 to 86400 seconds", *secs)
	}
	c.interval = time.Duration(*secs * float64(time.Second))
	if c.samples < 0 {
		return c, fmt.Errorf("-n %d: want >= 0", c.samples)
	}
	if *secs == 0 {
		c.samples = 1
	}
	rest := fs.Args()
	if !c.demo {
		if len(rest) == 0 {
			fs.Usage()
			return c, errors.New("missing URL")
		}
		u, err := url.Parse(rest[0])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return c, fmt.Errorf("URL %q: want http://host:port/path", rest[0])
		}
		c.base = rest[0]
		rest = rest[1:]
	}
	for _, r := range rest {
		if _, err := regexp.Compile(r); err != nil {
			return c, fmt.Errorf("REGEX %q: %v", r, err)
		}
	}
	c.filter = strings.Join(rest, "|")
	return c, nil
}

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseArgs(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "wqmon:", err)
		return 2
	}
	if c.demo {
		d, err := startDemo(stderr)
		if err != nil {
			fmt.Fprintln(stderr, "wqmon: demo:", err)
			return 1
		}
		defer d.stop()
		c.base = d.url
		fmt.Fprintf(stderr, "wqmon: demo workload served at %s/\n", d.url)
	}
	fmt.Fprintf(stderr, "wqmon: live page: %s\n", uiURL(c.base))
	if !c.jsonLines {
		writeLegend(stderr)
	}
	return monitor(ctx, c, stdout, stderr)
}

// writeLegend writes, once, what the table's columns mean, each line
// prefixed "wqmon: ", so that the columns are explained where the table
// is read and stdout keeps only the tables.
func writeLegend(w io.Writer) {
	var b strings.Builder
	_ = wqhttp.WriteMonitorLegend(&b)
	fmt.Fprintln(w, "wqmon: columns (\"-\": does not apply to that queue):")
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintln(w, "wqmon:   "+l)
	}
}

// uiURL returns the URL of wqhttp's live page (/ui) for base, the URL
// given on the command line (the handler's mount point, or its /monitor).
func uiURL(base string) string {
	u := strings.TrimRight(base, "/")
	u = strings.TrimSuffix(u, "/monitor")
	return u + "/ui"
}

// monitorURL returns the JSON sample URL for base and filter.
func monitorURL(base, filter string) string {
	u := strings.TrimRight(base, "/")
	if !strings.HasSuffix(u, "/monitor") {
		u += "/monitor"
	}
	q := url.Values{"format": {"json"}}
	if filter != "" {
		q.Set("filter", filter)
	}
	return u + "?" + q.Encode()
}

func fetch(ctx context.Context, client *http.Client, u string) (wqhttp.MonitorSample, error) {
	var s wqhttp.MonitorSample
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return s, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return s, fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&s); err != nil {
		return s, fmt.Errorf("GET %s: decoding: %w", u, err)
	}
	return s, nil
}

func monitor(ctx context.Context, c config, stdout, stderr io.Writer) int {
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport}
	u := monitorURL(c.base, c.filter)
	mode := "per-interval deltas (infl: current)"
	if c.cumulative {
		mode = "totals since allocation"
	}
	if c.jsonLines {
		mode = "JSON lines, totals"
	}
	fmt.Fprintf(stderr, "wqmon: polling %s every %v, %s; Ctrl-C to stop\n", u, c.interval, mode)
	var prev map[string]wqhttp.MonitorRow
	for i := 0; c.samples == 0 || i < c.samples; i++ {
		if i > 0 {
			t := time.NewTimer(c.interval)
			select {
			case <-ctx.Done():
				t.Stop()
				return 0
			case <-t.C:
			}
		}
		s, err := fetch(ctx, client, u)
		if err != nil {
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintln(stderr, "wqmon:", err)
			if i == 0 {
				return 1
			}
			continue
		}
		if c.jsonLines {
			err = writeJSONLines(stdout, s)
		} else {
			rows := s.Workqueues
			if !c.cumulative {
				var cur map[string]wqhttp.MonitorRow
				rows, cur = deltas(prev, s.Workqueues)
				prev = cur
			}
			if _, err = io.WriteString(stdout, "\n"); err == nil {
				err = wqhttp.WriteMonitorTable(stdout, rows)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "wqmon:", err)
			return 1
		}
	}
	return 0
}

// jsonRow is one line of -j output: wq_monitor.py's dict, with the time.
type jsonRow struct {
	Timestamp float64 `json:"timestamp"`
	wqhttp.MonitorRow
}

func writeJSONLines(w io.Writer, s wqhttp.MonitorSample) error {
	enc := json.NewEncoder(w)
	for _, r := range s.Workqueues {
		if err := enc.Encode(jsonRow{Timestamp: s.Timestamp, MonitorRow: r}); err != nil {
			return err
		}
	}
	return nil
}

// deltas returns rows with each counter replaced by its increase since
// prev (infl stays the current value) and the map of rows to pass as prev
// next time. Queues are matched by name and, for queues sharing a name, by
// order. A queue not in prev, or whose counters went down (it was
// destroyed and another took its name), shows its totals.
func deltas(prev map[string]wqhttp.MonitorRow, rows []wqhttp.MonitorRow) ([]wqhttp.MonitorRow, map[string]wqhttp.MonitorRow) {
	cur := make(map[string]wqhttp.MonitorRow, len(rows))
	seen := map[string]int{}
	out := make([]wqhttp.MonitorRow, 0, len(rows))
	for _, r := range rows {
		key := fmt.Sprintf("%s\x00%d", r.Name, seen[r.Name])
		seen[r.Name]++
		cur[key] = r
		p, ok := prev[key]
		if ok && r.Started >= p.Started && r.Completed >= p.Completed && r.CPUTimeUs >= p.CPUTimeUs {
			d := r
			d.Started -= p.Started
			d.Completed -= p.Completed
			d.CPUTimeUs -= p.CPUTimeUs
			d.CPUIntensive = max(r.CPUIntensive-p.CPUIntensive, 0)
			d.CMWakeup = max(r.CMWakeup-p.CMWakeup, 0)
			d.Repatriated = max(r.Repatriated-p.Repatriated, 0)
			d.Mayday = max(r.Mayday-p.Mayday, 0)
			d.Rescued = max(r.Rescued-p.Rescued, 0)
			d.Escaped = max(r.Escaped-p.Escaped, 0)
			d.Panics = max(r.Panics-p.Panics, 0)
			r = d
		}
		out = append(out, r)
	}
	return out, cur
}
