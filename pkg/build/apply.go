package build

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	buildv1 "github.com/archway-build/archway/pkg/apis/build/v1"
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
		u := EntryUpdate{Phase: buildv1.BuildPhaseNew, PodName: PlatformPodName(b.Name, p)}
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
		if u.CompletionTimestamp != nil && e.CompletionTimestamp == nil {
			e.CompletionTimestamp = u.CompletionTimestamp.DeepCopy()
		}
	}
	st.Phase, st.Reason, st.Message = plan.Phase, plan.Reason, plan.Message
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
		if c.Type != buildv1.BuildConditionType(phase) && c.Type != buildv1.BuildConditionNoOutput && c.Status == corev1.ConditionTrue {
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

// OwnedPlatformFields returns, for each status.platforms entry, the
// top-level fields the manager owns through server-side apply of the
// status subresource, read from the object's managed fields.
func OwnedPlatformFields(managed []metav1.ManagedFieldsEntry, manager string) map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for _, m := range managed {
		if m.Manager != manager || m.Operation != metav1.ManagedFieldsOperationApply || m.Subresource != "status" || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status struct {
				Platforms map[string]map[string]json.RawMessage `json:"f:platforms"`
			} `json:"f:status"`
		}
		if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		for key, entry := range fields.Status.Platforms {
			raw, ok := strings.CutPrefix(key, "k:")
			if !ok {
				continue
			}
			var k struct {
				Platform string `json:"platform"`
			}
			if json.Unmarshal([]byte(raw), &k) != nil || k.Platform == "" {
				continue
			}
			set := sets.New[string]()
			for f := range entry {
				if name, ok := strings.CutPrefix(f, "f:"); ok {
					set.Insert(name)
				}
			}
			out[k.Platform] = set
		}
	}
	return out
}

// StatusApply is the body of the controller's server-side apply of a
// Build's status. It holds the Build-level fields the controller owns and,
// for each platform entry, only the fields the controller sets now or set
// before (with their current values, so they are not dropped): a builder's
// fields are never in it. The resourceVersion it carries makes the apply
// fail with a conflict when the Build changed since it was read, so the
// controller never overwrites what it has not seen (it applies with force:
// the builder writes phase Running over the controller's New, and the
// controller writes Cancelled or a pod's failure over the builder's
// Running).
func StatusApply(b *buildv1.Build, next buildv1.BuildStatus, plan Plan) (*unstructured.Unstructured, error) {
	status := map[string]any{}
	put := func(k string, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var decoded any
		if err := json.Unmarshal(raw, &decoded); err != nil {
			return err
		}
		status[k] = decoded
		return nil
	}
	fields := []struct {
		key string
		v   any
		set bool
	}{
		{"phase", next.Phase, next.Phase != ""},
		{"reason", next.Reason, next.Reason != ""},
		{"message", next.Message, next.Message != ""},
		{"startTimestamp", next.StartTimestamp, next.StartTimestamp != nil},
		{"completionTimestamp", next.CompletionTimestamp, next.CompletionTimestamp != nil},
		{"duration", next.Duration, next.Duration != 0},
		{"durationSummary", next.DurationSummary, next.DurationSummary != ""},
		{"platformsSummary", next.PlatformsSummary, next.PlatformsSummary != ""},
		{"conditions", next.Conditions, len(next.Conditions) > 0},
	}
	for _, f := range fields {
		if f.set {
			if err := put(f.key, f.v); err != nil {
				return nil, err
			}
		}
	}
	if plan.CopyOutputFrom != "" {
		if next.Output.To != nil {
			status["output"] = map[string]any{"to": map[string]any{"imageDigest": next.Output.To.ImageDigest}}
		}
		if next.OutputDockerImageReference != "" {
			status["outputDockerImageReference"] = next.OutputDockerImageReference
		}
	}
	owned := OwnedPlatformFields(b.ManagedFields, FieldManager)
	var entries []any
	for _, e := range next.Platforms {
		want := owned[e.Platform]
		u, updated := plan.Entries[e.Platform]
		if want == nil && !updated {
			continue
		}
		want = want.Clone()
		if want == nil {
			want = sets.New[string]()
		}
		if updated {
			want.Insert("phase")
			for k, set := range map[string]bool{"reason": u.Reason != "", "message": u.Message != "", "podName": u.PodName != "",
				"completionTimestamp": u.CompletionTimestamp != nil} {
				if set {
					want.Insert(k)
				} else if u.Phase != "" && (k == "reason" || k == "message") {
					// A new phase without a reason clears the old one.
					want.Delete(k)
				}
			}
		}
		raw, err := json.Marshal(e)
		if err != nil {
			return nil, err
		}
		var all map[string]any
		if err := json.Unmarshal(raw, &all); err != nil {
			return nil, err
		}
		entry := map[string]any{"platform": e.Platform}
		for k := range want {
			if v, ok := all[k]; ok {
				entry[k] = v
			}
		}
		entries = append(entries, entry)
	}
	if len(entries) > 0 {
		status["platforms"] = entries
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": buildv1.GroupVersion.String(),
		"kind":       "Build",
		"metadata": map[string]any{
			"name":            b.Name,
			"namespace":       b.Namespace,
			"resourceVersion": b.ResourceVersion,
		},
		"status": status,
	}}
	return u, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
