package bed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// repoRoot is the root of the archway checkout this package was built from.
func repoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("bed: cannot locate the repository")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

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
