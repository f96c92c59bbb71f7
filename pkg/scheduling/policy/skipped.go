package policy

import "strings"

// SkippedAnnotation lists, on a pod or a workload, the parts of the
// policies that selected it but were not applied because the pod (the
// template), or a policy merged before, already had another value:
// "Kind/[namespace/]name: part, part; Kind/...: part", in merge order,
// with parts as Outcome.Kept names them. The mutating webhooks set it at
// the merge (and remove one they did not set); it marks the object for the
// skipped-parts webhook, which records events and the policies' status.
const SkippedAnnotation = "scheduling.archway.dev/skipped"

// Skip is the parts of one policy not applied to an object.
type Skip struct {
	// Policy is the policy's Ref.
	Policy string
	// Parts are as Outcome.Kept names them.
	Parts []string
}

// skips returns the parts of outcomes not applied, in merge order.
func skips(outcomes []Outcome) []Skip {
	var out []Skip
	for _, o := range outcomes {
		if len(o.Kept) > 0 {
			out = append(out, Skip{Policy: o.Policy.Ref(), Parts: o.Kept})
		}
	}
	return out
}

// formatSkips is the SkippedAnnotation value of s; empty for none.
func formatSkips(s []Skip) string {
	parts := make([]string, 0, len(s))
	for _, k := range s {
		parts = append(parts, k.Policy+": "+strings.Join(k.Parts, ", "))
	}
	return strings.Join(parts, "; ")
}

// partKind is a part's field, without a nodeSelector key: the label of
// archway_scheduling_policy_skipped_parts_total.
func partKind(part string) string {
	field, _, _ := strings.Cut(part, "[")
	return field
}
