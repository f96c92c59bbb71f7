package releaselist

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

const c1 = "d35e3f55be73088ab9028f0aa81ffac5095e6298"

// TestReadTree reads the tree's hack/releases.
func TestReadTree(t *testing.T) {
	rs, err := Read(filepath.Join("..", "releases"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0].Tag != "v0.1.0" {
		t.Errorf("releases %+v: want v0.1.0 first", rs)
	}
}

// TestReadRefuses refuses lines that do not name a release tag and a full
// commit, and a tag listed twice, naming the line.
func TestReadRefuses(t *testing.T) {
	for bad, want := range map[string]string{
		"v0.1.0\n":                               ":2: want a tag",
		"v0.1.0 d35e3f5\n":                       ":2: want a tag",
		"0.1.0 " + c1 + "\n":                     ":2: want a tag",
		"v0.1.0 " + strings.ToUpper(c1) + "\n":   ":2: want a tag",
		"v0.1.0 " + c1 + " extra\n":              ":2: want a tag",
		"v0.1 " + c1 + "\n":                      ":2: want a tag vX.Y.Z and its full commit name: \"v0.1\" is not",
		"v0.1.0+b1 " + c1 + "\n":                 "without build metadata",
		"v0.1.0 " + c1 + "\nv0.1.0 " + c1 + "\n": ":3: v0.1.0 is listed already on line 2",
	} {
		path := filepath.Join(t.TempDir(), "releases")
		if err := os.WriteFile(path, []byte("# a comment\n"+bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", bad, err, want)
		}
	}
}

// TestBefore orders by version, not by line.
func TestBefore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "releases")
	text := "v0.1.0 " + c1 + "\nv0.2.0 " + c1 + "\nv0.1.1 " + c1 + "\nv0.3.0-rc.1 " + c1 + "\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]string{
		"0.1.0": "", "0.1.1": "v0.1.0", "0.2.0": "v0.1.0 v0.1.1", "0.3.0-rc.1": "v0.1.0 v0.1.1 v0.2.0",
		"0.3.0": "v0.1.0 v0.1.1 v0.2.0 v0.3.0-rc.1",
	} {
		var tags []string
		for _, r := range Before(rs, semver.MustParse(v)) {
			tags = append(tags, r.Tag)
		}
		if got := strings.Join(tags, " "); got != want {
			t.Errorf("Before %s: %q, want %q", v, got, want)
		}
	}
}
