package scenario

import (
	"strings"
	"testing"
)

// The blocking table says once what "the CM monitor" is. Catches: jargon
// the output never expands.
func TestBlockingTableExplainsCMMonitor(t *testing.T) {
	var b strings.Builder
	if err := (&BlockingResult{}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(the CM monitor: ") {
		t.Errorf("output does not expand \"CM monitor\":\n%s", b.String())
	}
}
