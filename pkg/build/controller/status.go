package controller

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
	buildv1ac "github.com/archway-build/archway/pkg/apis/build/v1/applyconfiguration/build/v1"
)

// FieldManager is the field manager of every write the controller makes.
const FieldManager = "archway-build-controller"

// CleanupFieldManager is the field manager of the one condition the
// controller writes into an ended Build's status
// (PlatformTagsRemoved): its own, so that the apply leaves every field
// FieldManager owns as it is.
const CleanupFieldManager = "archway-build-controller-cleanup"

// ResolutionPlan is the Plan of the first status write of a multi-platform
// Build: an entry per platform, New, or Error with NodePlatformNotFound for
// a platform no node can build; the Build New, or failed at once.
func ResolutionPlan(b *buildv1.Build, res Resolution, now metav1.Time) Plan {
	plan := Plan{Entries: map[string]EntryUpdate{}, Phase: buildv1.BuildPhaseNew}
	for _, p := range res.Platforms {
		u := EntryUpdate{Phase: buildv1.BuildPhaseNew, PodName: buildv1.PlatformPodName(b.Name, p)}
		if host, ok := res.Emulated[p]; ok {
			u.EmulatedOn = host
			u.Message = fmt.Sprintf("No Ready schedulable node can build %s natively: it is built under emulation on a %s node.", p, host)
		}
		if msg, ok := res.NoNode[p]; ok {
			u = EntryUpdate{Phase: buildv1.BuildPhaseError, Reason: buildv1.StatusReasonNodePlatformNotFound,
				Message: msg + ".", CompletionTimestamp: &now}
		}
		plan.Entries[p] = u
	}
	if f := res.Failure; f != nil {
		plan.Phase, plan.Reason, plan.Message = f.Phase, f.Reason, f.Message
	}
	return plan
}

// QueuedPlan keeps a Build New, waiting for its turn under its
// BuildConfig's runPolicy, with message saying for what.
func QueuedPlan(message string) Plan {
	return Plan{Phase: buildv1.BuildPhaseNew, Message: message}
}

// FailurePlan fails a Build before anything else happens.
func FailurePlan(f *Failure) Plan {
	return Plan{Phase: f.Phase, Reason: f.Reason, Message: f.Message}
}

// NextStatus is the Build's status once the plan is carried out: the
// controller's entries written, the phase, reason and message set, start and
// completion times, duration, the summaries of the printer columns, one
// condition per phase (OpenShift's: the current one True) and NoOutput.
func NextStatus(b *buildv1.Build, platforms []string, plan Plan, now metav1.Time) buildv1.BuildStatus {
	st := *b.Status.DeepCopy()
	for _, p := range sortedKeys(plan.Entries) {
		u := plan.Entries[p]
		i := -1
		for j := range st.Platforms {
			if st.Platforms[j].Platform == p {
				i = j
			}
		}
		if i < 0 {
			st.Platforms = append(st.Platforms, buildv1.BuildStatusPlatform{Platform: p})
			i = len(st.Platforms) - 1
		}
		e := &st.Platforms[i]
		e.Phase, e.Reason, e.Message = u.Phase, u.Reason, u.Message
		if u.PodName != "" {
			e.PodName = u.PodName
		}
		if u.PodUID != "" {
			e.PodUID = u.PodUID
		}
		if u.EmulatedOn != "" {
			e.EmulatedOn = u.EmulatedOn
		}
		if u.CompletionTimestamp != nil && e.CompletionTimestamp == nil {
			e.CompletionTimestamp = u.CompletionTimestamp.DeepCopy()
		}
	}
	st.Phase, st.Reason, st.Message = plan.Phase, plan.Reason, plan.Message
	if plan.PodUID != "" {
		st.PodUID = plan.PodUID
	}
	if st.Phase == buildv1.BuildPhaseRunning && st.StartTimestamp == nil {
		st.StartTimestamp = now.DeepCopy()
	}
	if st.Phase.IsTerminal() {
		if st.CompletionTimestamp == nil {
			st.CompletionTimestamp = now.DeepCopy()
		}
		if st.StartTimestamp != nil {
			st.Duration = st.CompletionTimestamp.Sub(st.StartTimestamp.Time)
			st.DurationSummary = durationSummary(st.Duration)
		}
	}
	if len(platforms) > 0 {
		complete := 0
		for _, e := range st.Platforms {
			if e.Phase == buildv1.BuildPhaseComplete {
				complete++
			}
		}
		st.PlatformsSummary = fmt.Sprintf("%d/%d", complete, len(platforms))
	}
	if p := plan.CopyOutputFrom; p != "" {
		for _, e := range st.Platforms {
			if e.Platform != p {
				continue
			}
			if e.Output != nil && e.Output.ImageDigest != "" {
				st.Output.To = &buildv1.BuildStatusOutputTo{ImageDigest: e.Output.ImageDigest}
			}
			if e.OutputDockerImageReference != "" {
				st.OutputDockerImageReference = e.OutputDockerImageReference
			} else if b.Spec.Output.To != nil {
				st.OutputDockerImageReference = b.Spec.Output.To.Name
			}
		}
	}
	st.Conditions = phaseConditions(st.Conditions, st.Phase, st.Reason, st.Message, now)
	if b.Spec.Output.To == nil {
		st.Conditions = setCondition(st.Conditions, buildv1.BuildCondition{
			Type: buildv1.BuildConditionNoOutput, Status: corev1.ConditionTrue, Reason: buildv1.ReasonNoOutputReference,
			Message: "The build has no spec.output.to: its images are built and not pushed.",
		}, now)
	}
	return st
}

// phaseConditions keeps one condition per phase the build has been in, the
// current one True, as OpenShift does.
func phaseConditions(conds []buildv1.BuildCondition, phase buildv1.BuildPhase, reason buildv1.StatusReason, msg string, now metav1.Time) []buildv1.BuildCondition {
	out := make([]buildv1.BuildCondition, 0, len(conds)+1)
	for _, c := range conds {
		if c.Type != buildv1.BuildConditionType(phase) && c.Type != buildv1.BuildConditionNoOutput && controllerCondition(c.Type) && c.Status == corev1.ConditionTrue {
			c.Status, c.LastTransitionTime, c.LastUpdateTime = corev1.ConditionFalse, now, now
		}
		out = append(out, c)
	}
	return setCondition(out, buildv1.BuildCondition{Type: buildv1.BuildConditionType(phase), Status: corev1.ConditionTrue,
		Reason: string(reason), Message: msg}, now)
}

func setCondition(conds []buildv1.BuildCondition, c buildv1.BuildCondition, now metav1.Time) []buildv1.BuildCondition {
	for i := range conds {
		old := &conds[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message {
			return conds
		}
		if old.Status != c.Status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message, old.LastUpdateTime = c.Status, c.Reason, c.Message, now
		return conds
	}
	c.LastTransitionTime, c.LastUpdateTime = now, now
	return append(conds, c)
}

// StatusApply is the controller's server-side apply of a Build's status.
// It holds the Build-level fields the controller owns and, for each
// platform entry, the fields the controller owned before (read from the
// managed fields by ExtractBuildStatus, with their current values, so they
// are not dropped) and those it sets now: a builder's fields are never in
// it. The resourceVersion it carries makes the apply fail with a conflict
// when the Build changed since it was read, so the controller never
// overwrites what it has not seen (it applies with force: the builder
// writes phase Running over the controller's New, and the controller
// writes Cancelled or a pod's failure over the builder's Running).
func StatusApply(b *buildv1.Build, next buildv1.BuildStatus, plan Plan) (*buildv1ac.BuildApplyConfiguration, error) {
	owned, err := buildv1ac.ExtractBuildStatus(b, FieldManager)
	if err != nil {
		return nil, fmt.Errorf("reading the fields the controller owns in Build %s/%s: %w", b.Namespace, b.Name, err)
	}
	st := buildv1ac.BuildStatus()
	if next.Phase != "" {
		st.WithPhase(next.Phase)
	}
	if next.Reason != "" {
		st.WithReason(next.Reason)
	}
	if next.Message != "" {
		st.WithMessage(next.Message)
	}
	if next.StartTimestamp != nil {
		st.WithStartTimestamp(*next.StartTimestamp)
	}
	if next.CompletionTimestamp != nil {
		st.WithCompletionTimestamp(*next.CompletionTimestamp)
	}
	if next.Duration != 0 {
		st.WithDuration(next.Duration)
	}
	if next.DurationSummary != "" {
		st.WithDurationSummary(next.DurationSummary)
	}
	if next.PlatformsSummary != "" {
		st.WithPlatformsSummary(next.PlatformsSummary)
	}
	if next.PodUID != "" {
		st.WithPodUID(next.PodUID)
	}
	for _, c := range next.Conditions {
		if controllerCondition(c.Type) {
			st.WithConditions(buildv1ac.BuildCondition().WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).
				WithMessage(c.Message).WithLastUpdateTime(c.LastUpdateTime).WithLastTransitionTime(c.LastTransitionTime))
		}
	}
	if plan.CopyOutputFrom != "" {
		if next.Output.To != nil {
			st.WithOutput(buildv1ac.BuildStatusOutput().WithTo(buildv1ac.BuildStatusOutputTo().WithImageDigest(next.Output.To.ImageDigest)))
		}
		if next.OutputDockerImageReference != "" {
			st.WithOutputDockerImageReference(next.OutputDockerImageReference)
		}
	}
	ownedEntries := map[string]*buildv1ac.BuildStatusPlatformApplyConfiguration{}
	if owned.Status != nil {
		for i := range owned.Status.Platforms {
			if e := &owned.Status.Platforms[i]; e.Platform != nil {
				ownedEntries[*e.Platform] = e
			}
		}
	}
	for _, e := range next.Platforms {
		entry, had := ownedEntries[e.Platform]
		u, updated := plan.Entries[e.Platform]
		if !had && !updated {
			continue
		}
		if !had {
			entry = buildv1ac.BuildStatusPlatform().WithPlatform(e.Platform)
		}
		if updated {
			entry.WithPhase(u.Phase)
			// A new phase without a reason or message clears the old ones.
			entry.Reason, entry.Message = nil, nil
			if u.Reason != "" {
				entry.WithReason(u.Reason)
			}
			if u.Message != "" {
				entry.WithMessage(u.Message)
			}
			if u.PodName != "" {
				entry.WithPodName(u.PodName)
			}
			if u.PodUID != "" {
				entry.WithPodUID(u.PodUID)
			}
			if u.EmulatedOn != "" {
				entry.WithEmulatedOn(u.EmulatedOn)
			}
			if u.CompletionTimestamp != nil && e.CompletionTimestamp != nil {
				entry.WithCompletionTimestamp(*e.CompletionTimestamp)
			}
		}
		st.WithPlatforms(entry)
	}
	return buildv1ac.Build(b.Name, b.Namespace).WithResourceVersion(b.ResourceVersion).WithStatus(st), nil
}

// controllerCondition reports whether the controller writes conditions of
// type t: one per phase, and NoOutput. Others (PlatformTagsRemoved) have
// writers of their own.
func controllerCondition(t buildv1.BuildConditionType) bool {
	switch buildv1.BuildPhase(t) {
	case buildv1.BuildPhaseNew, buildv1.BuildPhasePending, buildv1.BuildPhaseRunning, buildv1.BuildPhaseComplete,
		buildv1.BuildPhaseFailed, buildv1.BuildPhaseError, buildv1.BuildPhaseCancelled:
		return true
	}
	return t == buildv1.BuildConditionNoOutput
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
