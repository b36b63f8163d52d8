package verity

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeNamesImageCache catches a README that no longer says where the
// lab's verity images are kept (tens of MB in the user's cache) and how to
// remove them, after DefaultDir moves.
func TestReadmeNamesImageCache(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Skipf("no README.md two levels up: %v", err)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skipf("no home directory: %v", err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", home)
	dir := DefaultDir()
	rel, err := filepath.Rel(home, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Skipf("DefaultDir %s is not under the home directory %s", dir, home)
	}
	shown := "~/" + filepath.ToSlash(rel)
	top := "~/" + strings.SplitN(filepath.ToSlash(rel), "/", 3)[0] + "/gowq"
	for _, want := range []string{shown, "rm -rf " + top, "XDG_CACHE_HOME", "--verity-dir"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not mention %q (the verity image cache, DefaultDir %s)", want, dir)
		}
	}
}
