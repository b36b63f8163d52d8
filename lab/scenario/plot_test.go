package scenario

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var svgTextX = regexp.MustCompile(`<text x="(-?[0-9.e+-]+)"`)

// Every scenario's plot title, with its seeds and a long load description,
// fits the image. Catches: the erofs title starting at x=-21.4, clipped.
func TestPlotTitlesFitEveryScenario(t *testing.T) {
	dir := t.TempDir()
	for _, d := range scenarioDefs {
		s := &ScenarioResult{Name: d.name, Title: d.title, Seeds: d.seeds,
			Load: LoadInfo{Antagonist: "2 hogs pinned to cpu0 at nice 19, 8 burners at 90% (qsort), fio randread 4k on cpu1"}}
		for _, r := range d.rows[:min(2, len(d.rows))] {
			row := Row{ID: r.ID, Label: r.Label, Kind: r.Kind, Class: r.Class,
				CDF: []CDFPoint{{2, 0}, {11, 0.5}, {108, 1}}, ClatCDF: []CDFPoint{{20, 0}, {110, 0.5}, {1080, 1}}, Throughput: &BackToBack{Items: 1000, ItemsPerSec: 4e5}}
			s.Rows = append(s.Rows, row)
		}
		path := filepath.Join(dir, d.name+".svg")
		if err := s.WritePlot(path); err != nil {
			t.Errorf("%s: %v", d.name, err)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range svgTextX.FindAllStringSubmatch(string(b), -1) {
			if x, err := strconv.ParseFloat(m[1], 64); err != nil || x < 0 {
				t.Errorf("%s: a text of the plot starts at x=%s, left of the image", d.name, m[1])
			}
		}
	}
}
