package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeReleaseRefuses runs make release (hack/release.sh, which makes
// this bundle last) with inputs it must refuse before building anything:
// each is an error saying what to give, and the release directory is not
// created.
func TestMakeReleaseRefuses(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"no version":      {[]string{"REGISTRY=r.example.com/me"}, "give the version"},
		"not semver":      {[]string{"VERSION=1.0", "REGISTRY=r.example.com/me"}, "VERSION='1.0' is not a release version"},
		"two parts":       {[]string{"VERSION=v1.0", "REGISTRY=r.example.com/me"}, "is not a release version"},
		"build metadata":  {[]string{"VERSION=v1.0.0+b1", "REGISTRY=r.example.com/me"}, "without build metadata"},
		"no registry":     {[]string{"VERSION=v1.0.0"}, "set REGISTRY"},
		"not its own dir": {[]string{"VERSION=v1.0.0", "REGISTRY=r.example.com/me", "RELEASE_DIR=" + theirs}, "was not written by make release"},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			args := append([]string{"-s", "-C", repo(t), "release", "RELEASE_DIR=" + out}, c.args...)
			cmd := exec.Command("make", args...)
			cmd.Env = append(os.Environ(), "VERSION=", "REGISTRY=")
			msg, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(msg), c.want) {
				t.Fatalf("make release %s: %v\n%s\nwant an error saying %q", strings.Join(c.args, " "), err, msg, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) && !strings.Contains(name, "dir") {
				t.Errorf("%s was created: %v", out, err)
			}
			if entries, _ := os.ReadDir(theirs); len(entries) != 0 {
				t.Errorf("%s was written into", theirs)
			}
		})
	}
}
