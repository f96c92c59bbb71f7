// Package buildconfig is the BuildConfig controller: it starts the first
// build of a BuildConfig with a ConfigChange trigger, cancels the queued
// builds a SerialLatestOnly run policy skips, prunes old builds beyond the
// history limits, and keeps status.lastVersion at least the number of the
// newest build (so numbering survives restores and hand-made builds).
//
// Plan is the pure decision; the reconciler reads the BuildConfig and its
// builds, calls it, and carries it out.
package buildconfig

import (
	"cmp"
	"slices"

	"k8s.io/utils/ptr"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildcontroller "github.com/archway-build/archway/pkg/build/controller"
)

// defaultHistoryLimit is the number of successful and of failed builds kept
// when the BuildConfig does not say (the CRD defaults both to 5 too).
const defaultHistoryLimit = 5

// Plan is what the controller does for one BuildConfig.
type Plan struct {
	// LastVersion, when set, is the value status.lastVersion is raised to.
	LastVersion *int64
	// StartConfigChange starts build 1 for the ConfigChange trigger.
	StartConfigChange bool
	// Cancel are queued builds to cancel (SerialLatestOnly).
	Cancel []string
	// Delete are ended builds beyond the history limits, oldest first.
	Delete []string
}

// Decide plans for bc given its builds (those labelled and annotated as
// its own).
func Decide(bc *buildv1.BuildConfig, builds []buildv1.Build) Plan {
	var plan Plan
	type numberedBuild struct {
		n int64
		b *buildv1.Build
	}
	var nb []numberedBuild
	highest := int64(0)
	for i := range builds {
		n, ok := buildcontroller.BuildNumber(&builds[i])
		if !ok {
			continue
		}
		nb = append(nb, numberedBuild{n, &builds[i]})
		highest = max(highest, n)
	}
	slices.SortFunc(nb, func(a, b numberedBuild) int { return cmp.Compare(a.n, b.n) })
	if highest > bc.Status.LastVersion {
		plan.LastVersion = ptr.To(highest)
	}
	if bc.Status.LastVersion == 0 && len(nb) == 0 && hasConfigChangeTrigger(bc) {
		plan.StartConfigChange = true
	}
	if bc.Spec.RunPolicy == buildv1.BuildRunPolicySerialLatestOnly {
		var queued []string
		for _, x := range nb {
			if buildcontroller.Queued(x.b) {
				queued = append(queued, x.b.Name)
			}
		}
		if len(queued) > 1 {
			plan.Cancel = queued[:len(queued)-1]
		}
	}
	var succeeded, failed []string
	for _, x := range nb {
		switch x.b.Status.Phase {
		case buildv1.BuildPhaseComplete:
			succeeded = append(succeeded, x.b.Name)
		case buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled:
			failed = append(failed, x.b.Name)
		}
	}
	plan.Delete = append(plan.Delete, beyond(succeeded, bc.Spec.SuccessfulBuildsHistoryLimit)...)
	plan.Delete = append(plan.Delete, beyond(failed, bc.Spec.FailedBuildsHistoryLimit)...)
	return plan
}

// beyond returns the oldest of names (sorted oldest first) beyond the newest
// limit ones.
func beyond(names []string, limit *int32) []string {
	keep := int(ptr.Deref(limit, defaultHistoryLimit))
	if keep < 0 {
		keep = 0
	}
	if len(names) <= keep {
		return nil
	}
	return names[:len(names)-keep]
}

func hasConfigChangeTrigger(bc *buildv1.BuildConfig) bool {
	return slices.ContainsFunc(bc.Spec.Triggers, func(t buildv1.BuildTriggerPolicy) bool {
		return t.Type == buildv1.ConfigChangeBuildTriggerType
	})
}
