// Package releaselist reads hack/releases, archway's releases oldest
// first, a tag and its commit a line: the upgrade test takes the release
// it upgrades from there, and the OLM bundle its upgrade edges (the
// releases a new one replaces and skips). The file travels with every
// clone; tags do not.
package releaselist

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
)

// Release is one line of hack/releases.
type Release struct {
	// Tag is vX.Y.Z[-pre]; Version is it without the v.
	Tag     string
	Version semver.Version
	// Commit is the full name of the commit the tag names.
	Commit string
}

// Read reads a release list: a release a line, its tag (v and a semantic
// version without build metadata) and its full commit name; # starts a
// comment. A line that is neither, or a tag listed twice, is an error
// naming the line.
func Read(path string) ([]Release, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []Release
	seen := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 || !strings.HasPrefix(fields[0], "v") || len(fields[1]) != 40 || strings.Trim(fields[1], "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%s:%d: want a tag vX.Y.Z and its full commit name, got %q", path, i+1, line)
		}
		v, err := semver.Parse(strings.TrimPrefix(fields[0], "v"))
		if err != nil || len(v.Build) > 0 {
			return nil, fmt.Errorf("%s:%d: want a tag vX.Y.Z and its full commit name: %q is not v and a semantic version without build metadata", path, i+1, fields[0])
		}
		if first, dup := seen[fields[0]]; dup {
			return nil, fmt.Errorf("%s:%d: %s is listed already on line %d", path, i+1, fields[0], first)
		}
		seen[fields[0]] = i + 1
		rs = append(rs, Release{Tag: fields[0], Version: v, Commit: fields[1]})
	}
	return rs, nil
}

// Before returns the releases older than v (by semantic version, not by
// line: a patch release of an older line may be listed after a newer
// one), oldest first.
func Before(rs []Release, v semver.Version) []Release {
	var out []Release
	for _, r := range rs {
		if r.Version.LT(v) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Release) int { return a.Version.Compare(b.Version) })
	return out
}
