package bed

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestRepoRoot finds the checkout whether the test binary was built with
// -trimpath (as make builds it) or without.
func TestRepoRoot(t *testing.T) {
	root := RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if got := modfile.ModulePath(data); got != module {
		t.Errorf("%s/go.mod is module %q, want %q", root, got, module)
	}
	if _, err := os.Stat(filepath.Join(root, "test", "bed", "tools.go")); err != nil {
		t.Errorf("%s holds no test/bed/tools.go: %v", root, err)
	}
}
