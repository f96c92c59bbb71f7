package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	kjson "sigs.k8s.io/json"

	"github.com/archway-build/archway/pkg/placement"
)

// gatePatch is the JSON patch that adds the scheduling gate and the gated
// label to the pod as the apiserver sent it (raw), and nothing else.
func gatePatch(raw []byte) ([]jsonpatch.Operation, error) {
	return admissionPatch(raw, map[string]string{placement.SchedulingGateLabel: placement.SchedulingGateLabelGated}, true)
}

// admissionPatch is the JSON patch that sets labels (and adds the
// scheduling gate when gate) on the pod as the apiserver sent it (raw),
// and nothing else. A patch computed by diffing the raw pod with a
// re-encoded typed pod (what controller-runtime's defaulters do) would
// also rewrite every field the typed encoding spells differently; this one
// touches only what the webhook owns, and costs no diff.
func admissionPatch(raw []byte, labels map[string]string, gate bool) ([]jsonpatch.Operation, error) {
	var probe struct {
		Metadata *struct {
			Labels map[string]json.RawMessage `json:"labels"`
		} `json:"metadata"`
		Spec *struct {
			SchedulingGates []json.RawMessage `json:"schedulingGates"`
		} `json:"spec"`
	}
	// A patch applies to an object: JSON null decodes into an empty pod,
	// and no path of it can be added to.
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("the pod is not a JSON object")
	}
	// Case-sensitive, as the apiserver reads JSON: a "Metadata" key is not
	// where a patch path "/metadata" points.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &probe); err != nil {
		return nil, err
	}
	var ops []jsonpatch.Operation
	switch {
	case len(labels) == 0:
	case probe.Metadata == nil:
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata", map[string]any{"labels": labels}))
	case probe.Metadata.Labels == nil:
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels", labels))
	default:
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/labels/"+escapePointer(k), labels[k]))
		}
	}
	if !gate {
		return ops, nil
	}
	g := map[string]string{"name": placement.SchedulingGate}
	switch {
	case probe.Spec == nil:
		ops = append(ops, jsonpatch.NewOperation("add", "/spec", map[string]any{"schedulingGates": []any{g}}))
	case len(probe.Spec.SchedulingGates) == 0:
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/schedulingGates", []any{g}))
	default:
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/schedulingGates/-", g))
	}
	return ops, nil
}

// escapePointer escapes a JSON pointer reference token (RFC 6901).
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
