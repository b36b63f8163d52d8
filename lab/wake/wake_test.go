package wake

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/gowq/wq/lab/antagonist"
)

func TestMain(m *testing.M) {
	antagonist.MaybeRunChild()
	os.Exit(m.Run())
}

func TestRunIdle(t *testing.T) {
	res, err := Run(context.Background(), Options{Load: LoadNone, Samples: 50, Slice: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(configs) {
		t.Fatalf("%d rows, want %d", len(res.Rows), len(configs))
	}
	for _, r := range res.Rows {
		if r.Skipped != "" {
			if os.Geteuid() == 0 {
				t.Errorf("%s skipped as root: %s", r.Config, r.Skipped)
			}
			continue
		}
		if r.Summary.Count != 50 || r.Summary.Min <= 0 || r.Summary.Max < r.Summary.Min {
			t.Errorf("%s: summary %+v", r.Config, r.Summary)
		}
	}
	var b bytes.Buffer
	res.WriteTable(&b)
	for _, want := range []string{"raw probe SCHED_FIFO", "gowq RT per-CPU", "gowq normal per-CPU", "latencies in us"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if os.Geteuid() == 0 && !strings.Contains(b.String(), "target 1:") {
		t.Errorf("table lacks the target lines:\n%s", b.String())
	}
}

func TestRunBadOptions(t *testing.T) {
	if _, err := Run(context.Background(), Options{Load: "bogus", Samples: 1}); err == nil {
		t.Error("unknown load accepted")
	}
	if _, err := Run(context.Background(), Options{Samples: -1}); err == nil {
		t.Error("negative samples accepted")
	}
}
