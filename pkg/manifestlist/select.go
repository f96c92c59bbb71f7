package manifestlist

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	"github.com/archway-build/archway/pkg/platform"
)

// Selection is which platforms of a finished multi-platform build the
// manifest list lists.
type Selection struct {
	// Included are the platforms that succeeded (phase Complete), in the
	// order they were given.
	Included []buildv1.BuildStatusPlatform
	// Skipped are the platforms that did not succeed but are allowed to
	// fail, in the order they were given: the list leaves them out.
	Skipped []buildv1.BuildStatusPlatform
}

// Select decides which platforms go into the manifest list, given every
// platform's status entry and the build's platformsAllowedToFail (compared
// in canonical form: linux/arm64/v8 allows linux/arm64 to fail).
//
// Every platform that succeeded goes in. A platform that ended in Failed,
// Error or Cancelled is left out when it is allowed to fail; when it is not,
// there is no list: the error has reason PlatformBuildFailed and names every
// such platform with its reason and message. With no platform succeeding
// there is no list either (ManifestListFailed). A platform that has not
// finished yet is an error too: call Select once every entry is terminal.
func Select(platforms []buildv1.BuildStatusPlatform, allowedToFail []string) (Selection, error) {
	if len(platforms) == 0 {
		return Selection{}, &Error{Reason: buildv1.StatusReasonManifestListFailed,
			Err: errors.New("the build has no per-platform status entries: nothing to list")}
	}
	allowed := make(map[string]bool, len(allowedToFail))
	for _, p := range allowedToFail {
		allowed[platformKey(p)] = true
	}
	var (
		sel      Selection
		failed   []string
		running  []string
		firstBad string
		seen     = map[string]string{}
	)
	for _, p := range platforms {
		key := platformKey(p.Platform)
		if other, dup := seen[key]; dup {
			return Selection{}, &Error{Reason: buildv1.StatusReasonManifestListFailed, Platform: p.Platform,
				Err: fmt.Errorf("platforms %s and %s are the same platform: the status has two entries for it", other, p.Platform)}
		}
		seen[key] = p.Platform
		switch {
		case p.Phase == buildv1.BuildPhaseComplete:
			sel.Included = append(sel.Included, p)
		case !p.Phase.IsTerminal():
			running = append(running, fmt.Sprintf("%s (%s)", p.Platform, phaseOrNotStarted(p.Phase)))
		case allowed[key]:
			sel.Skipped = append(sel.Skipped, p)
		default:
			if firstBad == "" {
				firstBad = p.Platform
			}
			failed = append(failed, describeFailure(p))
		}
	}
	switch {
	case len(running) > 0:
		return Selection{}, &Error{Reason: buildv1.StatusReasonManifestListFailed,
			Err: fmt.Errorf("platforms have not finished: %s", strings.Join(running, ", "))}
	case len(failed) > 0:
		what := "a platform that is not allowed to fail did not succeed"
		if len(failed) > 1 {
			what = "platforms that are not allowed to fail did not succeed"
		}
		return Selection{}, &Error{Reason: buildv1.StatusReasonPlatformBuildFailed, Platform: firstBad,
			Err: fmt.Errorf("%s, so no manifest list was pushed: %s", what, strings.Join(failed, "; "))}
	case len(sel.Included) == 0:
		var all []string
		for _, p := range sel.Skipped {
			all = append(all, describeFailure(p))
		}
		return Selection{}, &Error{Reason: buildv1.StatusReasonManifestListFailed,
			Err: fmt.Errorf("no platform succeeded, so no manifest list was pushed: %s", strings.Join(all, "; "))}
	}
	return sel, nil
}

// describeFailure says how a platform ended, for messages: "linux/s390x
// Failed (DockerBuildFailed: exit status 1)".
func describeFailure(p buildv1.BuildStatusPlatform) string {
	s := p.Platform + " " + string(p.Phase)
	var why []string
	if p.Reason != "" {
		why = append(why, string(p.Reason))
	}
	if msg := strings.TrimSpace(p.Message); msg != "" {
		why = append(why, firstLine(msg))
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ": ") + ")"
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	const max = 200
	if len(line) > max {
		line = line[:max] + "..."
	}
	return line
}

func phaseOrNotStarted(p buildv1.BuildPhase) string {
	if p == "" {
		return "not started"
	}
	return string(p)
}

// platformKey is the canonical form of a platform string, or the string
// itself when it does not parse (so that a bad spelling still compares equal
// to itself).
func platformKey(s string) string {
	p, err := platform.Parse(s)
	if err != nil {
		return s
	}
	return p.Key()
}

// Terminal reports whether every platform has finished (its phase is
// Complete, Failed, Error or Cancelled) and every platform in want (the
// build's spec.platforms, compared in canonical form) has an entry. It is
// what `builder manifest-list` waits for.
func Terminal(platforms []buildv1.BuildStatusPlatform, want []string) bool {
	if len(platforms) == 0 {
		return false
	}
	have := make([]string, 0, len(platforms))
	for _, p := range platforms {
		if !p.Phase.IsTerminal() {
			return false
		}
		have = append(have, platformKey(p.Platform))
	}
	for _, w := range want {
		if !slices.Contains(have, platformKey(w)) {
			return false
		}
	}
	return true
}
