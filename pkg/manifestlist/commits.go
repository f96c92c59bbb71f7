package manifestlist

import (
	"fmt"
	"slices"
	"strings"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
)

// SameCommit checks that the platforms a manifest list is to list were
// built from one commit: every included entry reports the same commit, and
// it is want (the Build's spec.revision.git.commit, possibly an
// abbreviated hash the reported full hash starts with) when want is set. A
// Build whose source is not Git (gitSource false) has no commits to
// compare. An index whose children were built from different commits
// would name one version of the source and hold several, so there is no
// list: the error (ManifestListFailed) names each platform's commit.
func SameCommit(included []buildv1.BuildStatusPlatform, gitSource bool, want string) error {
	if !gitSource || len(included) == 0 {
		return nil
	}
	byCommit := map[string][]string{}
	for _, p := range included {
		byCommit[p.Commit] = append(byCommit[p.Commit], p.Platform)
	}
	commits := make([]string, 0, len(byCommit))
	for c := range byCommit {
		commits = append(commits, c)
	}
	slices.Sort(commits)
	single := len(commits) == 1 && commits[0] != ""
	if single && strings.HasPrefix(commits[0], want) {
		return nil
	}
	var parts []string
	for _, c := range commits {
		shown := c
		if c == "" {
			shown = "no commit"
		}
		parts = append(parts, strings.Join(byCommit[c], ", ")+": "+shown)
	}
	what := "the platforms were built from different commits"
	switch {
	case single:
		what = fmt.Sprintf("the platforms were built from commit %s, not the Build's spec.revision %s", commits[0], want)
	case len(commits) == 1:
		what = "the platforms report no commit (a builder that does not record it?)"
	}
	return &Error{Reason: buildv1.StatusReasonManifestListFailed,
		Err: fmt.Errorf("%s (%s), so no manifest list was pushed: an index must hold one version of the source; start the build again",
			what, strings.Join(parts, "; "))}
}
