package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	multiarchv1beta1 "github.com/archway-build/archway/pkg/apis/multiarch/v1beta1"
)

// Annotations of a v1alpha1 ClusterPodPlacementConfig that hold the v1beta1
// fields v1alpha1 cannot express, so that a client that reads and writes
// v1alpha1 (kubectl edit, an MTO-era script) keeps them. They exist only in
// the v1alpha1 view: converting back to v1beta1 moves them into the fields
// and drops the annotations, so the stored object never has them. Both keys
// are reserved: on a v1beta1 object they are replaced.
const (
	// FallbackArchitectureAnnotation holds spec.fallbackArchitecture, under
	// the name the multiarch tuning operator's conversion uses.
	FallbackArchitectureAnnotation = "multiarch.openshift.io/fallback-architecture"
	// V1beta1FieldsAnnotation holds spec.plugins, spec.preferenceMerge and
	// status.observedGeneration as a JSON object (archway's: the operator
	// drops these fields in v1alpha1).
	V1beta1FieldsAnnotation = "placement.archway.dev/v1beta1-fields"
)

// v1beta1Fields is the JSON of V1beta1FieldsAnnotation.
type v1beta1Fields struct {
	Plugins            *multiarchv1beta1.Plugins        `json:"plugins,omitempty"`
	PreferenceMerge    multiarchv1beta1.PreferenceMerge `json:"preferenceMerge,omitempty"`
	ObservedGeneration int64                            `json:"observedGeneration,omitempty"`
}

var _ conversion.Convertible = &ClusterPodPlacementConfig{}

// ConvertTo converts src to the hub version, v1beta1, restoring the fields
// the annotations hold. The apiserver validates a v1alpha1 write against the
// v1alpha1 schema only, which says nothing of the annotations: their values
// are checked here against the v1beta1 schema's rules, and a bad one fails
// the write with what to fix.
func (src *ClusterPodPlacementConfig) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*multiarchv1beta1.ClusterPodPlacementConfig)
	if !ok {
		return fmt.Errorf("a v1alpha1 ClusterPodPlacementConfig converts to a v1beta1 one, not %T", dstRaw)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec = multiarchv1beta1.ClusterPodPlacementConfigSpec{
		LogVerbosity:      multiarchv1beta1.LogVerbosityLevel(src.Spec.LogVerbosity),
		NamespaceSelector: src.Spec.NamespaceSelector.DeepCopy(),
	}
	dst.Status = multiarchv1beta1.ClusterPodPlacementConfigStatus{Conditions: copyConditions(src.Status.Conditions)}
	if arch, ok := dst.Annotations[FallbackArchitectureAnnotation]; ok {
		if arch != "" && !slices.Contains(multiarchv1beta1.KnownArchitectures(), arch) {
			return fmt.Errorf("annotation %s: %q is not an architecture placement knows: write one of %s, or remove the annotation",
				FallbackArchitectureAnnotation, arch, strings.Join(multiarchv1beta1.KnownArchitectures(), ", "))
		}
		dst.Spec.FallbackArchitecture = arch
		delete(dst.Annotations, FallbackArchitectureAnnotation)
	}
	if raw, ok := dst.Annotations[V1beta1FieldsAnnotation]; ok {
		f, err := parseV1beta1Fields(raw)
		if err != nil {
			return fmt.Errorf("annotation %s (the v1beta1 fields v1alpha1 lacks; set them through v1beta1, or remove the annotation): %w",
				V1beta1FieldsAnnotation, err)
		}
		dst.Spec.Plugins, dst.Spec.PreferenceMerge, dst.Status.ObservedGeneration = f.Plugins, f.PreferenceMerge, f.ObservedGeneration
		delete(dst.Annotations, V1beta1FieldsAnnotation)
	}
	if len(dst.Annotations) == 0 {
		dst.Annotations = nil
	}
	return nil
}

// ConvertFrom converts the hub version, v1beta1, to dst, keeping what
// v1alpha1 cannot express in the annotations.
func (dst *ClusterPodPlacementConfig) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*multiarchv1beta1.ClusterPodPlacementConfig)
	if !ok {
		return fmt.Errorf("a v1alpha1 ClusterPodPlacementConfig converts from a v1beta1 one, not %T", srcRaw)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	dst.Spec = ClusterPodPlacementConfigSpec{
		LogVerbosity:      LogVerbosityLevel(src.Spec.LogVerbosity),
		NamespaceSelector: src.Spec.NamespaceSelector.DeepCopy(),
	}
	dst.Status = ClusterPodPlacementConfigStatus{Conditions: copyConditions(src.Status.Conditions)}
	delete(dst.Annotations, FallbackArchitectureAnnotation)
	delete(dst.Annotations, V1beta1FieldsAnnotation)
	if src.Spec.FallbackArchitecture != "" {
		setAnnotation(&dst.ObjectMeta, FallbackArchitectureAnnotation, src.Spec.FallbackArchitecture)
	}
	f := v1beta1Fields{Plugins: src.Spec.Plugins, PreferenceMerge: src.Spec.PreferenceMerge, ObservedGeneration: src.Status.ObservedGeneration}
	if f != (v1beta1Fields{}) {
		raw, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("annotation %s: %w", V1beta1FieldsAnnotation, err)
		}
		setAnnotation(&dst.ObjectMeta, V1beta1FieldsAnnotation, string(raw))
	}
	if len(dst.Annotations) == 0 {
		dst.Annotations = nil
	}
	return nil
}

func setAnnotation(m *metav1.ObjectMeta, key, value string) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// parseV1beta1Fields reads the annotation strictly (one JSON object, no
// unknown field) and checks it as the v1beta1 schema would.
func parseV1beta1Fields(raw string) (v1beta1Fields, error) {
	var f v1beta1Fields
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("not a JSON object of plugins, preferenceMerge and observedGeneration: %w", err)
	}
	if dec.More() {
		return f, errors.New("more than one JSON value")
	}
	return f, f.validate()
}

// maxScoringPlatforms is the v1beta1 schema's MaxItems of
// nodeAffinityScoring.platforms.
const maxScoringPlatforms = 16

// validate applies the v1beta1 schema's rules to the fields.
func (f v1beta1Fields) validate() error {
	var errs []error
	switch f.PreferenceMerge {
	case "", multiarchv1beta1.PreferenceMergeHighestPriority, multiarchv1beta1.PreferenceMergePerArchitecture:
	default:
		errs = append(errs, fmt.Errorf("preferenceMerge %q: write %s or %s", f.PreferenceMerge,
			multiarchv1beta1.PreferenceMergeHighestPriority, multiarchv1beta1.PreferenceMergePerArchitecture))
	}
	if f.ObservedGeneration < 0 {
		errs = append(errs, fmt.Errorf("observedGeneration %d is negative", f.ObservedGeneration))
	}
	if f.Plugins != nil && f.Plugins.NodeAffinityScoring != nil {
		platforms := f.Plugins.NodeAffinityScoring.Platforms
		if len(platforms) < 1 || len(platforms) > maxScoringPlatforms {
			errs = append(errs, fmt.Errorf("plugins.nodeAffinityScoring.platforms has %d entries: write 1 to %d", len(platforms), maxScoringPlatforms))
		}
		seen := map[string]bool{}
		for i, p := range platforms {
			if !slices.Contains(multiarchv1beta1.KnownArchitectures(), p.Architecture) {
				errs = append(errs, fmt.Errorf("plugins.nodeAffinityScoring.platforms[%d].architecture %q: write one of %s",
					i, p.Architecture, strings.Join(multiarchv1beta1.KnownArchitectures(), ", ")))
			}
			if seen[p.Architecture] {
				errs = append(errs, fmt.Errorf("plugins.nodeAffinityScoring.platforms[%d]: architecture %q is listed twice", i, p.Architecture))
			}
			seen[p.Architecture] = true
			if p.Weight < 1 || p.Weight > 100 {
				errs = append(errs, fmt.Errorf("plugins.nodeAffinityScoring.platforms[%d].weight %d: write 1 to 100", i, p.Weight))
			}
		}
	}
	return errors.Join(errs...)
}
