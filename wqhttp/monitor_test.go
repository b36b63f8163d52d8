package wqhttp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

func TestMonitor(t *testing.T) {
	plain := alloc(t, "wh_plain", wq.PerCPU)
	unb := alloc(t, "wh_mon_unbound", wq.Unbound|wq.MemReclaim)
	run(plain, 12, func() {})
	run(unb, 5, func() {})
	srv := server(t, wqhttp.Options{})

	r := get(t, srv, "/monitor")
	mustOK(t, r, "GET /monitor")
	lines := strings.Split(strings.TrimRight(r.body, "\n"), "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC" {
		t.Errorf("header %q", lines[0])
	}
	rows := map[string][]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		rows[f[0]] = f
	}
	// name total infl CPUtime CPUitsv CMW/RPR mayday rescued ESC
	if f := rows["wh_plain"]; len(f) != 9 || f[1] != "12" || f[2] != "0" || f[4] == "-" || f[6] != "-" || f[7] != "-" || f[8] != "-" {
		t.Errorf("wh_plain row %q, want total 12, infl 0, CPUitsv a number, mayday/rescued -", f)
	}
	if f := rows["wh_mon_unbound"]; len(f) != 9 || f[1] != "5" || f[4] != "-" || f[6] == "-" {
		t.Errorf("wh_mon_unbound row %q, want total 5, CPUitsv -, mayday a number", f)
	}

	s := decode[wqhttp.MonitorSample](t, get(t, srv, "/monitor?format=json"))
	if s.Timestamp < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("timestamp %v", s.Timestamp)
	}
	found := false
	for _, row := range s.Workqueues {
		if row.Name == "wh_plain" {
			found = true
			if row.Started != 12 || row.Completed != 12 || row.Infl != 0 || row.Unbound || row.Flags != "PERCPU" || row.Policy != "normal" {
				t.Errorf("wh_plain json %+v", row)
			}
		}
	}
	if !found {
		t.Error("wh_plain (not Sysfs) missing from /monitor: every live queue must be shown")
	}
	s = decode[wqhttp.MonitorSample](t, get(t, srv, "/monitor?format=json&filter=^wh_mon_"))
	if len(s.Workqueues) != 1 || s.Workqueues[0].Name != "wh_mon_unbound" || !s.Workqueues[0].Unbound || !s.Workqueues[0].MemReclaim {
		t.Errorf("filtered: %+v", s.Workqueues)
	}
	if r := get(t, srv, "/monitor?filter=("); r.code != http.StatusBadRequest {
		t.Errorf("bad filter: %d, want 400", r.code)
	}
	if r := get(t, srv, "/monitor?format=xml"); r.code != http.StatusBadRequest {
		t.Errorf("bad format: %d, want 400", r.code)
	}
}

func TestFormatMonitorRow(t *testing.T) {
	row := wqhttp.MonitorRow{Name: "a_very_long_workqueue_name_over_24", Started: 18545, Infl: 1, CPUTimeUs: 6_100_000, CPUIntensive: 2, CMWakeup: 5}
	got := wqhttp.FormatMonitorRow(row)
	want := "g_workqueue_name_over_24    18545     1    6.100       2       5       -       -       -"
	if got != want {
		t.Errorf("FormatMonitorRow:\n got %q\nwant %q", got, want)
	}
	row.EscapeAfterUs, row.Escaped = 50, 7
	if f := strings.Fields(wqhttp.FormatMonitorRow(row)); f[len(f)-1] != "7" {
		t.Errorf("escaping row %q, want ESC 7", f)
	}
	row = wqhttp.MonitorRow{Name: "u", Unbound: true, MemReclaim: true, Repatriated: 3, Mayday: 4, Rescued: 5}
	if f := strings.Fields(wqhttp.FormatMonitorRow(row)); strings.Join(f, " ") != "u 0 0 0.000 - 3 4 5 -" {
		t.Errorf("unbound row %q", f)
	}
}
