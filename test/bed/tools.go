package bed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/mod/modfile"
)

// module is archway's module path.
const module = "github.com/archway-build/archway"

// repoRoot is the root of the archway checkout this package was built
// from: two directories above this file, or, built with -trimpath (as the
// Makefile builds, when the file is named by its import path), the
// nearest directory at or above the working directory whose go.mod is
// archway's (go test runs a test in its package's directory; make runs
// the bed's command at the root).
var repoRoot = sync.OnceValue(func() string {
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	}
	dir, err := os.Getwd()
	if err != nil {
		panic(fmt.Sprintf("bed: cannot locate the archway checkout: %v", err))
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == module {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("bed: cannot locate the archway checkout: run from inside it (no go.mod of " + module + " at or above the working directory)")
		}
		dir = parent
	}
})

// RepoRoot returns the root of the archway checkout, for tests that need its
// files (CRDs, examples).
func RepoRoot() string { return repoRoot() }

// CacheDir is where hack/tools.sh keeps binaries, downloads and the base
// image: ARCHWAY_CACHE, else $XDG_CACHE_HOME/archway, else ~/.cache/archway.
func CacheDir() string {
	if d := os.Getenv("ARCHWAY_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "archway")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return filepath.Join(home, ".cache", "archway")
}

// AssetsDir is the directory of plain-named tool binaries hack/tools.sh
// maintains (kube-apiserver, etcd, kubectl, kube-scheduler, kwok, registry...).
func AssetsDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	out, err := exec.Command(filepath.Join(repoRoot(), "hack", "tools.sh"), "assets").Output()
	if err != nil {
		return "", fmt.Errorf("locating the bed's binaries with hack/tools.sh assets: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Tool returns the path of one of the bed's binaries, or an error that names
// the part that is missing and the command that installs it.
func Tool(name string) (string, error) {
	dir, err := AssetsDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("the bed needs %s, which is not installed at %s: run `make tools` (or `hack/tools.sh`)", name, path)
	}
	return path, nil
}
