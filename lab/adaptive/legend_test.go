package adaptive

import (
	"strings"
	"testing"
)

// The table says once what "the escaper" is. Catches: jargon the output
// never expands.
func TestTableExplainsEscaper(t *testing.T) {
	var b strings.Builder
	if err := (&Result{}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "(the escaper: ") {
		t.Errorf("output does not expand \"the escaper\":\n%s", b.String())
	}
}
