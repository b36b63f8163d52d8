package wqhttp

import (
	"encoding/json"
	"strings"
	"testing"
)

// /dump shows the nice a pool's workers run at and, when the process could
// not lower its inherited nice, the class's nice as asked. Catches: a
// niced unprivileged process's normal pools listed at nice 0.
func TestDumpShowsKeptInheritedNice(t *testing.T) {
	d := DumpReport{Pools: []DumpPool{{ID: 3, CPU: -1, CPUs: "0-1", Pod: "0-1", Class: "normal",
		Policy: "SCHED_OTHER", Nice: 19, AskedNice: 0, Workers: []DumpWorker{}}}}
	if txt := d.text(); !strings.Contains(txt, "nice= 19 (asked 0)") {
		t.Errorf("text dump does not show the kept nice 19 and the asked 0:\n%s", txt)
	}
	js, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"nice":19,"asked_nice":0`) {
		t.Errorf("JSON dump: %s", js)
	}
}
